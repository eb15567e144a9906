"""Discord approval buttons in a server channel (catalogue D9): fake REST + gateway → discord.py →
adapter → gateway → runtime → SQLite. A member who may not decide gets an ephemeral refusal and
nothing changes; the admin's press then works."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from agent.providers.scripted import ScriptedClient, reply
from bot.app import App
from bot.i18n import t
from config.loader import load_settings
from tests.fakes.discord_fake import FakeDiscord

USER, ADMIN, STRANGER = 42, 43, 99
GUILD, CHANNEL = 700, 310
EPHEMERAL = 64
NOT_ALLOWED = t("en", "approval_not_allowed")


@pytest.fixture
async def discord_app(tmp_path, monkeypatch):
    fake = FakeDiscord()
    await fake.start()
    fake.patch(monkeypatch)
    script = ScriptedClient()
    home = tmp_path / "home"
    env = {
        "TAPEBOT_HOME": str(home),
        "OPENAI_API_KEY": "sk-test-unused-000000",
        "DISCORD_BOT_TOKEN": "discord-test-token-abcdef",
        "TAPEBOT_DISCORD__ALLOWED_USERS": f"[{USER},{ADMIN}]",
        "TAPEBOT_DISCORD__ADMINS": f"[{ADMIN}]",
        "TAPEBOT_SCHEDULER__ENABLED": "false",
        "TAPEBOT_MEMORY__ENABLED": "false",
    }
    app = App(
        load_settings(home, env),
        model_factory=lambda _m: script,
        adapter_options={"discord": {"guild_ready_timeout": 0.05}},  # no guilds in READY: no wait
    )
    await app.start(adapters=True)
    yield fake, script, home
    await app.stop()
    await fake.close()


def components(msg: dict) -> list[dict]:
    return [c for row in msg.get("components", []) for c in row.get("components", [])]


def approval_status(home, approval_id: str) -> str:
    con = sqlite3.connect(home / "tapebot.db")
    try:
        return con.execute("SELECT status FROM approvals WHERE id = ?", (approval_id,)).fetchone()[0]
    finally:
        con.close()


def ephemeral_answers(fake: FakeDiscord, token: str) -> list[dict]:
    return [f["message"] for f in fake.followups if f["token"] == token]


async def test_a_member_who_is_not_an_approver_is_refused_ephemerally_then_the_admin_decides(discord_app):
    fake, script, home = discord_app
    script.add(reply(tool_calls=[("write_file", {"path": "d9.txt", "content": "guild"})]), reply("Saved it."))
    await fake.push_guild_message(GUILD, CHANNEL, USER, "write d9.txt", mention_bot=True)
    card = await fake.wait_for(lambda: next((m for m in fake.bot_messages(CHANNEL) if components(m)), None))
    once = next(c for c in components(card) if c["custom_id"].startswith("tb:o:"))
    approval_id = once["custom_id"].split(":", 2)[2]
    before = [dict(c) for c in components(card)]

    # the requester (allowed, but not an admin) and a member who is not even allowed press Allow
    refused = []
    for who in (USER, STRANGER):
        press = await fake.push_button(
            once["custom_id"], message_id=card["id"], user_id=who, channel_id=CHANNEL, guild_id=GUILD
        )
        answers = await fake.wait_for(lambda p=press: ephemeral_answers(fake, p["token"]))
        refused.append((who, answers))
    await asyncio.sleep(0.2)
    for who, answers in refused:
        assert len(answers) == 1, who
        assert NOT_ALLOWED in answers[0]["content"], who
        assert answers[0]["flags"] & EPHEMERAL, f"the refusal to {who} is visible to everyone"
    assert approval_status(home, approval_id) == "pending"
    assert not (home / "workspace" / "d9.txt").exists()
    assert components(card) == before, "the card changed"
    assert len(script.requests) == 1
    assert not any("Approved" in m["content"] for m in fake.bot_messages(CHANNEL))

    # the admin's press works
    press = await fake.push_button(
        once["custom_id"], message_id=card["id"], user_id=ADMIN, channel_id=CHANNEL, guild_id=GUILD
    )
    await fake.wait_for(lambda: any("Saved it." in m["content"] for m in fake.bot_messages(CHANNEL)))
    assert (home / "workspace" / "d9.txt").read_text() == "guild"
    assert approval_status(home, approval_id) == "approved"
    assert not components(card) and "Approved by" in card["content"]
    assert not ephemeral_answers(fake, press["token"])  # no refusal for the admin
