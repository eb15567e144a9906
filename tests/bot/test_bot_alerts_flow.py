"""Alerts through Telegram (fake Bot API), the scripted model and an akshare stand-in with bars to
2026-12-03: "tell me when 600519 closes below X" is set without an approval card and confirmed with
its exact condition; the after-close refresh brings 2026-12-04, the alert fires and reaches the
chat once, with its chart; /alerts lists and removes what is left, also after a restart; /status
shows the data's date and age."""

from __future__ import annotations

import json
import sys
from datetime import date

from agent.providers.scripted import ScriptedClient, reply
from bot.parts import market_refresh_jobs
from tests.bot.conftest import ALICE, Harness
from tests.fakes.market_libs import FakeAkshare
from tests.fakes.telegram_api import FakeBotAPI

LIVE = {"TAPEBOT_MARKETS__PROVIDER": "akshare"}


def confirmed(req):
    data = json.loads(req.messages[-1].tool_results[0].content)
    assert "confirmed" in data, data
    return reply(data["confirmed"])


async def test_alert_set_fired_once_and_listed_after_restart(tmp_path, monkeypatch):
    ak = FakeAkshare(end=date(2026, 12, 3))
    monkeypatch.setitem(sys.modules, "akshare", ak)
    c0 = float(ak.stock_zh_a_hist("600519", end_date="20261203").to_dict("records")[-1]["收盘"])
    level = round(c0 * 0.5)
    api = FakeBotAPI()
    script = ScriptedClient()
    h = Harness(tmp_path / "home", api, script, extra_env=LIVE)
    script.add(
        reply(tool_calls=[("manage_alerts", {"action": "create", "kind": "close_below", "code": "600519", "value": level})]),
        confirmed,
        reply(tool_calls=[("manage_alerts", {"action": "watch", "code": "300750"})]),
        reply("300750 is on your watchlist."),
        reply(tool_calls=[("manage_alerts", {"action": "create", "kind": "move_pct", "value": 5})]),
        confirmed,
    )  # fmt: skip
    try:
        await h.start()
        api.push_text(ALICE, f"tell me when 600519 closes below {level}", user_id=ALICE)
        want = f"alert #1 set: 600519: close below {level} — checked on each new daily bar after 2026-12-03"
        await api.wait_for(lambda: any(want in t for t in api.texts(ALICE)), timeout=20)
        assert not any(
            (m.get("reply_markup") or {}).get("inline_keyboard") for m in api.sent(ALICE)
        )  # no card
        api.push_text(ALICE, "watch 300750", user_id=ALICE)
        await api.wait_for(lambda: any("on your watchlist" in t for t in api.texts(ALICE)), timeout=20)
        api.push_text(ALICE, "and tell me when anything on it moves 5% in a day", user_id=ALICE)
        await api.wait_for(lambda: any("alert #2 set: watchlist" in t for t in api.texts(ALICE)), timeout=20)

        api.push_text(ALICE, "/status", user_id=ALICE)
        await api.wait_for(
            lambda: any("Market data: A-shares 2026-12-03 (" in t for t in api.texts(ALICE)), timeout=10
        )

        # the after-close refresh: 2026-12-04 arrives with 600519 far below the level
        ak.end = date(2026, 12, 4)
        ak.override["600519"] = lambda closes: [*closes[:-1], round(c0 * 0.4, 2)]
        photos = len(api.calls_to("sendPhoto"))
        job = market_refresh_jobs(h.app.market, h.app._deliver_alerts)["refresh_cn"]
        result = await job()
        assert "1 alert(s) fired, 1 delivered" in result, result
        fired = [t for t in api.texts(ALICE) if t.startswith("🔔 Alert #1")]
        assert len(fired) == 1 and f"close below {level}" in fired[0] and "2026-12-04" in fired[0]
        assert len(api.calls_to("sendPhoto")) == photos + 1  # with its chart
        again = await job()  # the same bars evaluated again (a retried job, another replica)
        assert "0 alert(s) fired, 0 delivered" in again
        assert len([t for t in api.texts(ALICE) if t.startswith("🔔")]) == 1
    finally:
        await h.stop()

    api2 = api  # the same bot on Telegram's side; a new process on ours
    h2 = Harness(tmp_path / "home", api2, ScriptedClient(), extra_env=LIVE)
    try:
        await h2.start()
        api2.push_text(ALICE, "/alerts", user_id=ALICE)
        listing = await api2.wait_for(
            lambda: next((t for t in api2.texts(ALICE) if t.startswith("Alerts (")), None), timeout=10
        )
        assert "#2 watchlist: daily move of 5% or more (up or down)" in listing and "#1" not in listing
        assert "Watchlist: 300750" in listing
        api2.push_text(ALICE, "/alerts remove 2", user_id=ALICE)
        await api2.wait_for(lambda: any("Alert #2 removed" in t for t in api2.texts(ALICE)), timeout=10)
        api2.push_text(ALICE, "/alerts remove 2", user_id=ALICE)
        await api2.wait_for(lambda: any("no alert #2 of yours" in t for t in api2.texts(ALICE)), timeout=10)
    finally:
        await h2.stop()
