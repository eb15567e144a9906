"""Live-price alerts end to end: Telegram (fake Bot API), the scripted model and an akshare stand-in
that serves Monday's daily bar while Monday trades (as Eastmoney does; it is not a close, so the
stored bars end Friday 2026-12-04) and Monday's minute bars. "Tell me when 600519 trades below X"
is confirmed with the live check stated; the intraday poll at Monday 10:05 (injected time) finds
the 09:32 dip, delivers it once with its chart; later polls, a second poller (a replica without
the lease) and the refresh after the close deliver nothing more; after a restart the alert is
done and the poll is quiet. A poller that does not hold the scheduler's lease asks nothing."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from agent.providers.scripted import ScriptedClient, reply
from bot.alert_delivery import AlertDelivery
from bot.alert_poll import IntradayAlertPoll, polls
from bot.parts import market_refresh_jobs
from markets.alerts import AlertStore
from tests.bot.conftest import ALICE, Harness
from tests.bot.test_bot_alerts_flow import confirmed
from tests.fakes.market_libs import FakeAkshare, akshare_minute_rows
from tests.fakes.telegram_api import FakeBotAPI

LIVE = {"TAPEBOT_MARKETS__PROVIDER": "akshare"}
MON = date(2026, 12, 7)
AT_1005 = datetime(2026, 12, 7, 10, 5, tzinfo=ZoneInfo("Asia/Shanghai")).astimezone(UTC)


def alerts_in(api: FakeBotAPI) -> list[str]:
    return [t for t in api.texts(ALICE) if t.startswith("🔔")]


class NotLeader:
    is_leader = False


async def test_live_alert_set_by_chat_fires_once_in_the_session_and_not_again(tmp_path, monkeypatch):
    ak = FakeAkshare(end=MON)  # as Eastmoney does, it serves Monday's bar while Monday trades
    monkeypatch.setitem(sys.modules, "akshare", ak)
    c0 = float(ak.stock_zh_a_hist("600519", end_date="20261204").to_dict("records")[-1]["收盘"])
    level = round(c0 * 0.98)
    api = FakeBotAPI()
    script = ScriptedClient()
    h = Harness(tmp_path / "home", api, script, extra_env=LIVE)
    script.add(
        reply(tool_calls=[("manage_alerts", {"action": "create", "kind": "price_below", "code": "600519", "value": level})]),
        confirmed,
    )  # fmt: skip
    try:
        app = await h.start()
        assert app.market is not None and polls(app.market) and app.intraday_poll is not None
        app.market.clock = lambda: AT_1005  # Monday 10:05 in Shanghai
        api.push_text(ALICE, f"tell me when 600519 trades below {level}", user_id=ALICE)
        want = (
            f"alert #1 set: 600519: price trades below {level} — checked on each new daily bar after "
            "2026-12-04 (3 days old) (close"
        )
        await api.wait_for(lambda: any(want in t for t in api.texts(ALICE)), timeout=20)
        assert any("and on live prices every 60 s in trading hours" in t for t in api.texts(ALICE))

        photos = len(api.calls_to("sendPhoto"))
        ak.minutes["600519"] = akshare_minute_rows(MON, [c0, round(c0 * 0.97, 2), c0 * 0.99, c0])
        assert await app.intraday_poll.tick() == (1, 1)
        [fired] = alerts_in(api)
        assert fired.startswith(
            f"🔔 Alert #1: 贵州茅台 600519 — price trades below {level}\nLive in the 2026-12-07"
        )
        assert "Daily bars to 2026-12-04 (3 days old)" in fired
        assert len(api.calls_to("sendPhoto")) == photos + 1  # with its chart

        app.market.clock = lambda: AT_1005 + timedelta(minutes=1)
        assert await app.intraday_poll.tick() == (0, 0)
        replica = IntradayAlertPoll(
            app.market,
            AlertDelivery(
                AlertStore(app.market.sessions()), app.market, app.gateway.chats, app.gateway.adapters
            ),
        )
        assert await replica.tick() == (0, 0)  # a second process polling the same prices
        ak.calls.clear()
        standby = IntradayAlertPoll(app.market, replica.delivery, leader=NotLeader())
        assert await standby.tick() == (0, 0) and ak.calls == []  # without the lease: nothing asked

        # the refresh after Monday's close: 600519 closes under the level too — same trigger, no fire
        app.market.clock = lambda: AT_1005 + timedelta(hours=5, minutes=35)  # 15:40
        ak.override["600519"] = lambda closes: [*closes[:-1], round(c0 * 0.96, 2)]
        result = await market_refresh_jobs(app.market, app._deliver_alerts)["refresh_cn"]()
        assert "0 alert(s) fired, 0 delivered" in result and "newest bar 2026-12-07" in result, result
        assert len(alerts_in(api)) == 1
    finally:
        await h.stop()

    h2 = Harness(tmp_path / "home", api, ScriptedClient(), extra_env=LIVE)
    try:
        app2 = await h2.start()
        assert app2.market is not None and app2.intraday_poll is not None
        app2.market.clock = lambda: AT_1005 + timedelta(hours=3)
        ak.calls.clear()
        assert await app2.intraday_poll.tick() == (0, 0)
        assert ak.calls == []  # the alert is done: nothing left to ask for
        api.push_text(ALICE, "/alerts", user_id=ALICE)
        await api.wait_for(
            lambda: any(t.startswith("No alerts are set") for t in api.texts(ALICE)), timeout=10
        )
        assert len(alerts_in(api)) == 1
    finally:
        await h2.stop()


async def test_no_poll_without_a_live_provider_or_with_the_interval_off(tmp_path):
    api = FakeBotAPI()
    for env in ({}, {**LIVE, "TAPEBOT_MARKETS__ALERT_POLL_S": "0"}):
        h = Harness(tmp_path / f"home{len(env)}", api, ScriptedClient(), extra_env=env)
        try:
            app = await h.start()
            assert app.intraday_poll is None and app.market is not None and not polls(app.market)
        finally:
            await h.stop()


async def test_a_data_update_by_another_process_reaches_status_and_the_chat(tmp_path, monkeypatch):
    """As an operator runs it: the bot is up, `tapebot data update` (cron; its own process and bar
    store) brings 2026-12-04 — /status of the running bot says so, and the alert it triggered is
    delivered by the bot once, with its chart."""
    import io

    from bot.cli import CliContext
    from bot.cli import market_data as cli_data

    ak = FakeAkshare(end=date(2026, 12, 3))
    monkeypatch.setitem(sys.modules, "akshare", ak)
    c3 = float(ak.stock_zh_a_hist("600519", end_date="20261203").to_dict("records")[-1]["收盘"])
    api = FakeBotAPI()
    script = ScriptedClient()
    h = Harness(tmp_path / "home", api, script, extra_env=LIVE)
    script.add(
        reply(tool_calls=[("manage_alerts", {"action": "create", "kind": "close_below", "code": "600519", "value": c3 * 2})]),
        confirmed,
    )  # fmt: skip
    try:
        app = await h.start()
        api.push_text(ALICE, "tell me when 600519 closes below twice its price", user_id=ALICE)
        await api.wait_for(lambda: any("alert #1 set" in t for t in api.texts(ALICE)), timeout=20)
        api.push_text(ALICE, "/status", user_id=ALICE)
        await api.wait_for(
            lambda: any("Market data: A-shares 2026-12-03 (" in t for t in api.texts(ALICE)), timeout=10
        )

        ak.end = date(2026, 12, 4)
        out = io.StringIO()
        env = {"TAPEBOT_HOME": str(tmp_path / "home"), **LIVE}
        ctx = CliContext(home=tmp_path / "home", environ=env, stdout=out, stderr=out)
        assert await asyncio.to_thread(cli_data.main, ["update", "--market", "cn"], ctx) == 0, out.getvalue()
        assert "1 alert(s) triggered" in out.getvalue()

        api.push_text(ALICE, "/status", user_id=ALICE)
        await api.wait_for(
            lambda: any("Market data: A-shares 2026-12-04 (" in t for t in api.texts(ALICE)), timeout=10
        )
        photos = len(api.calls_to("sendPhoto"))
        assert await app._deliver_alerts() == 1  # the bot's delivery round (every minute)
        assert await app._deliver_alerts() == 0
        [fired] = alerts_in(api)
        assert "Close " in fired and "on 2026-12-04" in fired
        assert len(api.calls_to("sendPhoto")) == photos + 1
    finally:
        await h.stop()


async def test_a_crypto_price_alert_through_the_ccxt_ticker_keeps_every_digit(tmp_path, monkeypatch):
    """With provider = ccxt, BTC is polled around the clock (a Sunday night here): the level and the
    live price are stated with every digit (151234.5, not 151234)."""
    from tests.fakes.market_libs import FakeCcxtExchange, FakeCcxtModule, ccxt_ticker

    ex = FakeCcxtExchange(end=date(2026, 12, 5))
    monkeypatch.setitem(sys.modules, "ccxt", FakeCcxtModule(ex))
    api = FakeBotAPI()
    script = ScriptedClient()
    h = Harness(tmp_path / "home", api, script, extra_env={"TAPEBOT_MARKETS__PROVIDER": "ccxt"})
    script.add(
        reply(tool_calls=[("manage_alerts", {"action": "create", "kind": "price_above", "code": "BTC", "value": 150000.5})]),
        confirmed,
    )  # fmt: skip
    sunday_night = datetime(2026, 12, 6, 22, 40, tzinfo=UTC)
    try:
        app = await h.start()
        assert app.market is not None and app.intraday_poll is not None
        app.market.clock = lambda: sunday_night
        api.push_text(ALICE, "tell me when BTC trades above 150000.5", user_id=ALICE)
        await api.wait_for(
            lambda: any("BTC/USDT: price trades above 150000.5 — checked" in t for t in api.texts(ALICE)),
            timeout=20,
        )
        ex.tickers["BTC/USDT"] = ccxt_ticker("BTC/USDT", 149_999.0, sunday_night)
        assert await app.intraday_poll.tick() == (0, 0)
        ex.tickers["BTC/USDT"] = ccxt_ticker("BTC/USDT", 151_234.5, sunday_night)
        assert await app.intraday_poll.tick() == (1, 1)
        assert await app.intraday_poll.tick() == (0, 0)
        [fired] = alerts_in(api)
        assert "price trades above 150000.5\nLive in the 2026-12-06 session: 151234.5." in fired
        assert fired.endswith("\nccxt")
    finally:
        await h.stop()
