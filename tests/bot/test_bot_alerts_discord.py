"""Alerts on Discord (fake REST + gateway, discord.py, the scripted model, an akshare stand-in):
set in a DM without an approval, listed and removed with the `/alerts` slash command's
subcommands, and a firing delivered into the DM once, with its chart attached."""

from __future__ import annotations

import sys
from datetime import date

import pytest

from agent.providers.scripted import ScriptedClient, reply
from bot.parts import market_refresh_jobs
from tests.bot.conftest import make_discord_app
from tests.bot.test_bot_alerts_flow import confirmed
from tests.fakes.discord_fake import FakeDiscord
from tests.fakes.market_libs import FakeAkshare

DM, USER = 300, 42


@pytest.fixture
async def discord_app(tmp_path):
    fake = FakeDiscord(tls=True)
    await fake.start()
    script = ScriptedClient()
    app = make_discord_app(
        tmp_path / "home",
        fake,
        script,
        f"[{USER}]",
        TAPEBOT_MEMORY__ENABLED="false",
        TAPEBOT_MARKETS__PROVIDER="akshare",
    )
    try:
        yield fake, script, app
    finally:
        await app.stop()
        await fake.close()


def said(fake: FakeDiscord) -> list[str]:
    return [m["content"] for m in fake.bot_messages(DM)]


def followed(fake: FakeDiscord) -> list[str]:
    return [f["message"]["content"] for f in fake.followups]


async def test_alerts_set_listed_fired_and_removed_on_discord(discord_app, monkeypatch):
    fake, script, app = discord_app
    ak = FakeAkshare(end=date(2026, 12, 3))
    monkeypatch.setitem(sys.modules, "akshare", ak)
    c3 = float(ak.stock_zh_a_hist("600519", end_date="20261203").to_dict("records")[-1]["收盘"])
    level = round(c3 * 2)
    script.add(
        reply(tool_calls=[("manage_alerts", {"action": "create", "kind": "close_below", "code": "600519", "value": level})]),
        confirmed,
        reply(tool_calls=[("manage_alerts", {"action": "create", "kind": "rsi_above", "code": "000001", "value": 70})]),
        confirmed,
    )  # fmt: skip
    await app.start(adapters=True)
    await fake.push_dm(channel_id=DM, user_id=USER, content=f"tell me when 600519 closes below {level}")
    await fake.wait_for(lambda: any(f"alert #1 set: 600519: close below {level}" in t for t in said(fake)))
    await fake.push_dm(channel_id=DM, user_id=USER, content="and when 000001's RSI goes above 70")
    await fake.wait_for(
        lambda: any("alert #2 set: 000001: RSI(14) crosses above 70" in t for t in said(fake))
    )
    assert not any(m.get("components") for m in fake.bot_messages(DM))  # no approval card

    await fake.push_command(
        "alerts", [{"type": 1, "name": "list", "options": []}], user_id=USER, channel_id=DM
    )
    listing = await fake.wait_for(
        lambda: next((t for t in followed(fake) if t.startswith("Alerts (2)")), None)
    )
    assert f"#1 600519: close below {level}" in listing and "#2 000001: RSI(14) crosses above 70" in listing

    ak.end = date(2026, 12, 4)
    assert app.market is not None
    result = await market_refresh_jobs(app.market, app._deliver_alerts)["refresh_cn"]()
    assert "1 delivered" in result, result
    fired = [m for m in fake.bot_messages(DM) if m["content"].startswith("🔔 Alert #1")]
    assert len(fired) == 1 and "2026-12-04" in fired[0]["content"]
    charts = [m for m in fake.bot_messages(DM) if m["attachments"]]
    assert len(charts) == 1 and charts[0]["attachments"][0]["filename"].endswith(".png")
    await market_refresh_jobs(app.market, app._deliver_alerts)["refresh_cn"]()
    assert len([t for t in said(fake) if t.startswith("🔔")]) == 1  # once

    remove = {"type": 1, "name": "remove", "options": [{"name": "id", "type": 4, "value": 2}]}
    await fake.push_command("alerts", [remove], user_id=USER, channel_id=DM)
    await fake.wait_for(lambda: any("Alert #2 removed" in t for t in followed(fake)))
    await fake.push_command(
        "alerts", [{"type": 1, "name": "list", "options": []}], user_id=USER, channel_id=DM
    )
    await fake.wait_for(lambda: any(t.startswith("No alerts are set") for t in followed(fake)))
