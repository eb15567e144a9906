"""Discord end to end: fake REST + gateway → discord.py → adapter → gateway → runtime → SQLite."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from agent.providers.scripted import ScriptedClient, reply
from bot.app import App
from bot.i18n import t
from tests.bot.conftest import make_discord_app
from tests.fakes.discord_fake import FakeDiscord

USER, ADMIN, STRANGER = 42, 43, 99
GUILD, CHANNEL = 700, 310
EPHEMERAL = 64
NOT_ALLOWED = t("en", "approval_not_allowed")


@pytest.fixture
async def discord_app(tmp_path):
    fake = FakeDiscord(tls=True)
    await fake.start()
    script = ScriptedClient()
    apps: list[App] = []

    async def start() -> App:
        app = make_discord_app(
            tmp_path / "home", fake, script, f"[{USER},{ADMIN}]", TAPEBOT_DISCORD__ADMINS=f"[{ADMIN}]"
        )
        await app.start(adapters=True)
        apps.append(app)
        return app

    yield fake, script, start, tmp_path / "home"
    for app in apps:
        await app.stop()
    await fake.close()


def components(msg):
    return [c for row in msg.get("components", []) for c in row.get("components", [])]


async def test_dm_conversation_and_slash_command(discord_app):
    fake, script, start, _ = discord_app
    script.add(reply("Hi from tapebot."))
    await start()
    assert fake.command_syncs, "slash commands were synced on first start"
    await fake.push_dm(channel_id=300, user_id=USER, content="hello")
    await fake.wait_for(lambda: any("Hi from tapebot." in m["content"] for m in fake.bot_messages(300)))
    await fake.push_slash("status", user_id=USER, channel_id=300)
    await fake.wait_for(lambda: fake.followups and "Session" in fake.followups[0]["message"]["content"])
    assert fake.callbacks[0]["type"] == 5  # deferred within the 3 s window, then followed up


async def test_stranger_is_denied(discord_app):
    fake, script, start, _ = discord_app
    await start()
    await fake.push_dm(channel_id=301, user_id=STRANGER, content="hello")
    await fake.wait_for(lambda: any(str(STRANGER) in m["content"] for m in fake.bot_messages(301)))
    assert script.requests == []


async def test_button_approval_after_restart_without_resync(discord_app):
    fake, script, start, home = discord_app
    script.add(reply(tool_calls=[("write_file", {"path": "d.txt", "content": "from discord"})]))
    app = await start()
    syncs = len(fake.command_syncs)
    await fake.push_dm(channel_id=300, user_id=USER, content="write d.txt")
    card = await fake.wait_for(lambda: next((m for m in fake.bot_messages(300) if components(m)), None))
    once = next(c for c in components(card) if c["custom_id"].startswith("tb:o:"))
    await app.stop()
    script.add(reply("Wrote it."))
    await start()
    assert len(fake.command_syncs) == syncs  # unchanged command set is not re-synced
    await fake.push_button(once["custom_id"], message_id=card["id"], user_id=USER, channel_id=300)
    await fake.wait_for(lambda: any("Wrote it." in m["content"] for m in fake.bot_messages(300)))
    assert (home / "workspace" / "d.txt").read_text() == "from discord"


def approval_status(home, approval_id: str) -> str:
    con = sqlite3.connect(home / "tapebot.db")
    try:
        return con.execute("SELECT status FROM approvals WHERE id = ?", (approval_id,)).fetchone()[0]
    finally:
        con.close()


def ephemeral_answers(fake: FakeDiscord, token: str) -> list[dict]:
    return [f["message"] for f in fake.followups if f["token"] == token]


# a guild member who may not approve gets an ephemeral refusal; nothing changes
async def test_a_member_who_is_not_an_approver_is_refused_ephemerally_then_the_admin_decides(discord_app):
    fake, script, start, home = discord_app
    await start()
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
    await asyncio.sleep(0.2)  # absence: time for a refused press to be answered twice or to decide
    for who, answers in refused:
        assert len(answers) == 1, who
        # a member hears that admins decide here; a stranger, that they may not
        expected = t("en", "approval_admin_only") if who == USER else NOT_ALLOWED
        assert expected in answers[0]["content"], who
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


async def test_c2_model_echoing_the_discord_token_never_reaches_discord(discord_app):
    """Secrets on Discord: the model prints the bot token and the API key in small stream
    chunks; no message or edit sent to Discord holds either, nor a telling piece of them."""
    fake, script, start, home = discord_app
    token, key = "discord-test-token-abcdef", "sk-test-unused-000000"
    script.add(reply(f"token={token} and key {key} — done.", pieces=12))
    await start()
    await fake.push_dm(channel_id=305, user_id=USER, content="print your token")
    await fake.wait_for(lambda: any("done." in m["content"] for m in fake.bot_messages(305)))
    sent = repr([c.json for c in fake.calls])  # every REST body: messages and each streamed edit
    for secret in (token, key):
        assert secret not in sent and secret[-8:] not in sent
    db = sqlite3.connect(home / "tapebot.db")
    try:
        stored = repr(db.execute("SELECT * FROM messages").fetchall())
    finally:
        db.close()
    assert token not in stored and key not in stored


# ---- nothing left unanswered -----------------------------------------------------------------------
async def test_a_strangers_slash_command_in_a_server_gets_the_allow_list_answer_privately(discord_app):
    fake, script, start, _ = discord_app
    await start()
    press = await fake.push_slash("status", user_id=STRANGER, channel_id=CHANNEL, guild_id=GUILD)
    answers = await fake.wait_for(lambda: ephemeral_answers(fake, press["token"]))
    assert len(answers) == 1 and str(STRANGER) in answers[0]["content"]
    assert answers[0]["flags"] & EPHEMERAL, "the allow-list answer is visible to everyone"
    assert script.requests == []


async def test_a_button_whose_defer_fails_is_still_decided(discord_app):
    fake, script, start, home = discord_app
    script.add(reply(tool_calls=[("write_file", {"path": "df.txt", "content": "deferred"})]), reply("Saved."))
    await start()
    await fake.push_dm(channel_id=300, user_id=USER, content="write df.txt")
    card = await fake.wait_for(lambda: next((m for m in fake.bot_messages(300) if components(m)), None))
    once = next(c for c in components(card) if c["custom_id"].startswith("tb:o:"))
    fake.inject("POST", "/callback", status=404, after=False)  # the defer fails (token expired)
    await fake.push_button(once["custom_id"], message_id=card["id"], user_id=USER, channel_id=300)
    await fake.wait_for(lambda: any("Saved." in m["content"] for m in fake.bot_messages(300)))
    assert (home / "workspace" / "df.txt").read_text() == "deferred"


async def test_a_button_whose_defer_and_handler_fail_asks_to_tap_again(discord_app):
    """The defer fails and then so does the handling (the decision step raises): the
    user is asked in the chat to tap again, and the next tap decides it."""
    fake, script, start, home = discord_app
    script.add(reply(tool_calls=[("write_file", {"path": "tap.txt", "content": "again"})]), reply("Saved."))
    app = await start()
    await fake.push_dm(channel_id=300, user_id=USER, content="write tap.txt")
    card = await fake.wait_for(lambda: next((m for m in fake.bot_messages(300) if components(m)), None))
    once = next(c for c in components(card) if c["custom_id"].startswith("tb:o:"))
    runtime = app.runtime
    real = runtime.decide

    async def broken(*a, **kw):
        runtime.decide = real  # once
        raise RuntimeError("the handler failed")

    runtime.decide = broken
    fake.inject("POST", "/callback", status=404, after=False)  # the defer fails (token expired)
    await fake.push_button(once["custom_id"], message_id=card["id"], user_id=USER, channel_id=300)
    again = t("en", "button_failed")
    await fake.wait_for(lambda: any(again in m["content"] for m in fake.bot_messages(300)))
    assert not (home / "workspace" / "tap.txt").exists()
    await fake.push_button(once["custom_id"], message_id=card["id"], user_id=USER, channel_id=300)
    await fake.wait_for(lambda: any("Saved." in m["content"] for m in fake.bot_messages(300)))
    assert (home / "workspace" / "tap.txt").read_text() == "again"
