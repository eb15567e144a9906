"""Consent you can trust, end to end: fake Telegram Bot API → adapter → gateway →
runtime (scripted model) → real SQLite. One test (or a few) per consent rule. The observable effects: the file `write_file` would create, the
approval row, the cards' texts and buttons, what the bot answered.
"""

from __future__ import annotations

import asyncio
import io
import sqlite3
from datetime import datetime

import pytest

from agent.providers.scripted import reply
from bot.cli import CliContext
from bot.i18n import t
from tests.bot import test_bot_approval_integrity as integrity
from tests.bot import test_bot_discord_flow as discord_flow
from tests.bot.conftest import ADMIN, ALICE, BOB, Harness
from tests.bot.test_bot_approval_integrity import (
    GROUP,
    MENTION,
    STALE,
    answer_to,
    approval_row,
    card_in,
    current,
    data_of,
    tap,
    workspace,
)
from tests.fakes.telegram_api import FakeBotAPI, buttons_of

# fixtures shared with the approval-integrity and Discord tests
write_count = integrity.write_count
discord_app = discord_flow.discord_app

UNCLEAR = t("en", "approval_unclear")
ADMIN_ONLY = "only an admin"
BUY = {"code": "600519", "side": "buy", "quantity": 100}


def approval_id(card: dict) -> str:
    return data_of(card, "o").split(":", 1)[1]


def kinds(card: dict) -> list[str]:
    return [b["callback_data"].split(":", 1)[0] for b in buttons_of(card)]


def all_cards(api: FakeBotAPI, chat_id: int) -> list[dict]:
    """Every approval card sent to the chat, decided (buttons gone) or not."""
    return [m for m in api.sent(chat_id) if m.get("text", "").startswith("🔐")]


async def nth_card(api: FakeBotAPI, chat_id: int, n: int) -> dict:
    return await api.wait_for(
        lambda: all_cards(api, chat_id)[n] if len(all_cards(api, chat_id)) > n else None
    )


async def said(api: FakeBotAPI, chat_id: int, part: str, timeout: float = 5.0) -> str:
    return await api.wait_for(lambda: next((x for x in api.texts(chat_id) if part in x), None), timeout)


def rows(home, sql: str, *args) -> list[tuple]:
    con = sqlite3.connect(home / "tapebot.db")
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def trades(home) -> list[tuple]:
    return rows(home, "SELECT symbol, side, quantity, status FROM market_trades ORDER BY id")


# ---- 1. "deny", "Deny", "3", "第三个" at a card ----------------------------------------------------
@pytest.mark.parametrize("text", ["deny", "Deny"])
async def test_typing_deny_at_a_card_denies_it(harness, write_count, text):
    harness.script.add(
        reply(tool_calls=[("write_file", {"path": "d1.txt", "content": "x"})]), reply("Not written.")
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "write d1", user_id=ALICE)
    card = await card_in(api, ALICE)
    api.push_text(ALICE, text, user_id=ALICE)
    await said(api, ALICE, "Not written.")
    assert approval_row(harness.home, approval_id(card))["status"] == "denied"
    assert write_count == [] and not (workspace(harness) / "d1.txt").exists()
    assert "Denied" in current(api, ALICE, card)["text"]


@pytest.mark.parametrize("text", ["3", "1", "第三个", "👍", "a", "once"])
async def test_an_option_number_emoji_or_unknown_word_at_a_card_runs_nothing(harness, write_count, text):
    harness.script.add(reply(tool_calls=[("write_file", {"path": "d3.txt", "content": "x"})]))
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "write d3", user_id=ALICE)
    card = await card_in(api, ALICE)
    api.push_text(ALICE, text, user_id=ALICE)
    await said(api, ALICE, UNCLEAR)
    await asyncio.sleep(0.1)  # absence: time for the unclear text to be wrongly taken as consent
    assert approval_row(harness.home, approval_id(card))["status"] == "pending"  # the card stays
    assert write_count == [] and len(harness.script.requests) == 1


# ---- 2. the same words mean the same thing everywhere (the terminal: tests/cli) ----------------
@pytest.mark.parametrize("text", ["好", "yes", "OK!", "同意"])
async def test_a_documented_affirmative_allows_in_chat(harness, write_count, text):
    harness.script.add(
        reply(tool_calls=[("write_file", {"path": "ok.txt", "content": "x"})]), reply("Saved.")
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "write ok", user_id=ALICE)
    await card_in(api, ALICE)
    api.push_text(ALICE, text, user_id=ALICE)
    await said(api, ALICE, "Saved.")
    assert write_count == ["ok.txt"]


# ---- 3. standing approvals: scoped, visible, revocable, limited -----------------------------------
async def test_always_allow_on_a_paper_buy_covers_only_that_instrument_side_and_size(harness):
    s = harness.script
    s.add(reply(tool_calls=[("execute_trade", BUY)]), reply("Bought."))
    await harness.start()
    api, home = harness.api, harness.home
    api.push_text(ALICE, "buy 100 moutai", user_id=ALICE)
    card = await card_in(api, ALICE)
    assert kinds(card) == ["o", "a", "d"]
    tap(api, ALICE, card["message_id"], data_of(card, "a"), ALICE)
    await said(api, ALICE, "Bought.")
    assert "standing approval" in current(api, ALICE, card)["text"]
    rule_id = rows(home, "SELECT id FROM standing_approvals")[0][0]

    # the same order again, and a smaller one: no card
    s.add(reply(tool_calls=[("execute_trade", {**BUY, "quantity": 100})]), reply("Bought again."))
    api.push_text(ALICE, "again", user_id=ALICE)
    await said(api, ALICE, "Bought again.")
    assert len(all_cards(api, ALICE)) == 1 and len(trades(home)) == 2
    # ... but never unseen: the chat is told which standing approval it ran under
    told = [x for x in api.texts(ALICE) if x.startswith("✅ Ran under this chat's standing approval")]
    assert len(told) == 1 and "buy 600519 ≤ 100" in told[0] and "/rules" in told[0]

    # bigger, the other side, another instrument: each asks again
    for n, args in enumerate(
        [{**BUY, "quantity": 200}, {**BUY, "side": "sell"}, {**BUY, "code": "000001"}], start=1
    ):
        s.add(reply(tool_calls=[("execute_trade", args)]), reply(f"Asked {n}."))
        api.push_text(ALICE, f"order {n}", user_id=ALICE)
        card_n = await nth_card(api, ALICE, n)
        tap(api, ALICE, card_n["message_id"], data_of(card_n, "d"), ALICE)
        await said(api, ALICE, f"Asked {n}.")
    assert len(trades(home)) == 2

    # visible: /rules and /status
    api.push_text(ALICE, "/rules", user_id=ALICE)
    listing = await said(api, ALICE, t("en", "rules_head"))
    assert rule_id in listing
    assert "execute_trade" in listing and "buy 600519 ≤ 100" in listing and str(ALICE) in listing
    assert "expires" in listing
    api.push_text(ALICE, "/status", user_id=ALICE)
    await said(api, ALICE, t("en", "rules_status", n=1))

    # revocable: after /rules revoke <id> the same order asks again
    api.push_text(ALICE, f"/rules revoke {rule_id}", user_id=ALICE)
    await said(api, ALICE, t("en", "rules_revoked", n=1))
    s.add(reply(tool_calls=[("execute_trade", BUY)]), reply("Asked again."))
    api.push_text(ALICE, "buy once more", user_id=ALICE)
    last = await nth_card(api, ALICE, 4)
    tap(api, ALICE, last["message_id"], data_of(last, "d"), ALICE)
    await said(api, ALICE, "Asked again.")
    assert len(trades(home)) == 2


async def test_rules_revoke_all_and_the_shell_command(harness, write_count):
    s = harness.script
    for name in ("r1.txt", "r2.txt"):
        s.add(reply(tool_calls=[("write_file", {"path": name, "content": "x"})]), reply(f"Saved {name}."))
    await harness.start()
    api = harness.api
    for n, name in enumerate(("r1.txt", "r2.txt")):
        api.push_text(ALICE, f"write {name}", user_id=ALICE)
        card = await nth_card(api, ALICE, n)
        tap(api, ALICE, card["message_id"], data_of(card, "a"), ALICE)
        await said(api, ALICE, f"Saved {name}.")
    ids = sorted(r[0] for r in rows(harness.home, "SELECT id FROM standing_approvals"))
    assert len(ids) == 2

    from bot import approval_rules as rules_cli

    out = io.StringIO()
    ctx = CliContext(home=harness.home, environ={"TAPEBOT_HOME": str(harness.home)}, stdout=out)
    assert await asyncio.to_thread(rules_cli.main, ["list"], ctx) == 0
    text = out.getvalue()
    assert all(i in text for i in ids) and "write_file r1.txt" in text and f"telegram:{ALICE}" in text
    out.truncate(0)
    assert await asyncio.to_thread(rules_cli.main, ["revoke", ids[0]], ctx) == 0
    assert "1" in out.getvalue() and len(rows(harness.home, "SELECT id FROM standing_approvals")) == 1

    api.push_text(ALICE, "/rules revoke all", user_id=ALICE)
    await said(api, ALICE, t("en", "rules_revoked", n=1))
    api.push_text(ALICE, "/rules", user_id=ALICE)
    await said(api, ALICE, t("en", "rules_none"))


async def test_exec_command_offers_no_always_and_a_forged_always_runs_nothing(harness):
    """No standing approval for shell commands, not even through a forged `a:` callback."""
    harness.script.add(reply(tool_calls=[("exec_command", {"command": "echo hi > e.txt"})]))
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "run it", user_id=ALICE)
    card = await card_in(api, ALICE)
    assert kinds(card) == ["o", "d"]
    assert t("en", "card_no_always") in card["text"]
    cb = tap(api, ALICE, card["message_id"], f"a:{approval_id(card)}", ALICE)
    await api.wait_for(lambda: answer_to(api, cb))
    assert answer_to(api, cb).get("text") == STALE
    assert approval_row(harness.home, approval_id(card))["status"] == "pending"
    assert rows(harness.home, "SELECT * FROM standing_approvals") == []
    api.push_text(ALICE, "always", user_id=ALICE)  # typed: not offered, so not an answer
    await said(api, ALICE, UNCLEAR)
    assert approval_row(harness.home, approval_id(card))["status"] == "pending"
    assert not (workspace(harness) / "e.txt").exists()


async def test_in_a_group_a_standing_approval_covers_only_admins_requests(harness, write_count):
    s = harness.script
    s.add(reply(tool_calls=[("write_file", {"path": "g.txt", "content": "admin"})]), reply("Admin saved."))
    await harness.start()
    api = harness.api
    api.push_text(GROUP, f"{MENTION} write g.txt", user_id=ADMIN)
    card = await card_in(api, GROUP)
    assert t("en", "card_who_group") in card["text"]
    tap(api, GROUP, card["message_id"], data_of(card, "a"), ADMIN)
    await said(api, GROUP, "Admin saved.")
    # a member asks for the very same action: still a card, and only an admin decides it
    s.add(reply(tool_calls=[("write_file", {"path": "g.txt", "content": "member"})]), reply("Member saved."))
    api.push_text(GROUP, f"{MENTION} write g.txt again", user_id=ALICE)
    second = await nth_card(api, GROUP, 1)
    cb = tap(api, GROUP, second["message_id"], data_of(second, "o"), ALICE)
    await api.wait_for(lambda: answer_to(api, cb))
    assert write_count == ["g.txt"]
    tap(api, GROUP, second["message_id"], data_of(second, "o"), ADMIN)
    await said(api, GROUP, "Member saved.")
    assert write_count == ["g.txt", "g.txt"]
    # the admin's own later request is covered
    s.add(reply(tool_calls=[("write_file", {"path": "g.txt", "content": "admin2"})]), reply("Admin again."))
    api.push_text(GROUP, f"{MENTION} once more", user_id=ADMIN)
    await said(api, GROUP, "Admin again.")
    assert len(all_cards(api, GROUP)) == 2 and write_count == ["g.txt"] * 3


# ---- 4. groups: addressed consent from an approver; admin-only settings -----------------------------
async def test_an_admins_plain_ok_in_a_group_does_not_approve_a_reply_to_the_card_does(harness, write_count):
    harness.script.add(
        reply(tool_calls=[("write_file", {"path": "m.txt", "content": "x"})]), reply("Saved m.")
    )
    await harness.start()
    api = harness.api
    api.push_text(GROUP, f"{MENTION} write m.txt", user_id=ALICE)
    card = await card_in(api, GROUP)
    api.push_text(GROUP, "ok", user_id=ADMIN)  # neither a mention nor a reply to the card
    api.push_text(GROUP, "ok", user_id=ALICE)  # the requester is no approver in a group
    api.push_text(GROUP, f"{MENTION} ping", user_id=BOB)  # a member's message: the card stays
    api.push_text(GROUP, "/help", user_id=BOB)  # a member's command: the card stays
    api.push_text(GROUP, "/cancel", user_id=BOB)
    await said(api, GROUP, t("en", "approval_not_allowed"))
    other = next(m for m in api.sent(GROUP) if m.get("text") == t("en", "approval_not_allowed"))
    api.push_text(GROUP, "ok", user_id=ADMIN, reply_to=other["message_id"])  # a reply, not to the card
    # the member's mention and the admin's reply elsewhere wait for the decision: each hears so once
    await api.wait_for(lambda: api.texts(GROUP).count(t("en", "held_until_decided")) == 2)
    assert approval_row(harness.home, approval_id(card))["status"] == "pending"
    assert buttons_of(current(api, GROUP, card)) and write_count == []
    api.push_text(GROUP, f"{MENTION} ping again", user_id=BOB)
    await asyncio.sleep(0.2)  # absence: time for a second notice to the same member
    assert api.texts(GROUP).count(t("en", "held_until_decided")) == 2
    api.push_text(GROUP, "ok", user_id=ADMIN, reply_to=card["message_id"])
    await said(api, GROUP, "Saved m.")
    assert write_count == ["m.txt"]


async def test_an_admin_mentioning_the_bot_with_yes_approves(harness, write_count):
    harness.script.add(
        reply(tool_calls=[("write_file", {"path": "y.txt", "content": "x"})]), reply("Saved y.")
    )
    await harness.start()
    api = harness.api
    api.push_text(GROUP, f"{MENTION} write y.txt", user_id=ALICE)
    await card_in(api, GROUP)
    api.push_text(GROUP, f"{MENTION} 确认", user_id=ADMIN)
    await said(api, GROUP, "Saved y.")
    assert write_count == ["y.txt"]


@pytest.mark.parametrize("command", ["/model main", "/lang zh", "/brief off", "/clear", "/rules revoke all"])
async def test_a20_a_member_cannot_change_a_groups_settings_or_policy(harness, command):
    """A20 (owner-only controls): a non-admin's /model, /lang, /brief, /clear or /rules in a group
    is refused; approvers (admins) are a separate set."""
    harness.script.add(reply("Hello group."))
    await harness.start()
    api = harness.api
    api.push_text(GROUP, command, user_id=ALICE)
    answer = await said(api, GROUP, ADMIN_ONLY)
    assert command.split()[0] in answer
    api.push_text(GROUP, "/lang", user_id=ADMIN)  # an admin may; the group's language is unchanged
    await said(api, GROUP, "Usage: /lang en or /lang zh")


async def test_a20_a_member_cannot_approve_by_command_in_a_group(harness, write_count):
    """/approve <id> from an allow-listed member who is not an admin does nothing."""
    harness.script.add(reply(tool_calls=[("write_file", {"path": "a20.txt", "content": "x"})]))
    await harness.start()
    api = harness.api
    api.push_text(GROUP, f"{MENTION} write a20", user_id=ALICE)
    card = await card_in(api, GROUP)
    api.push_text(GROUP, f"/approve {approval_id(card)}", user_id=ALICE)
    await said(api, GROUP, t("en", "approval_admin_only"))  # who may decide here: an admin
    assert approval_row(harness.home, approval_id(card))["status"] == "pending" and write_count == []


# ---- 5. readable cards ----------------------------------------------------------------------------
async def test_a_trade_card_is_informed_consent(harness):
    harness.script.add(reply(tool_calls=[("execute_trade", BUY)]))
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "buy 100 moutai", user_id=ALICE)
    card = await card_in(api, ALICE)
    text = card["text"]
    for part in (
        "贵州茅台 (600519)",
        "BUY 100",
        "PAPER",
        "Last price",
        "2025-09-03",
        "Estimated amount",
        "fees",
        "Cash 1,000,000.00 →",
        t("en", "card_who_dm"),
        "Expires",
        "in 30 min",
        "buy 600519 ≤ 100 per order",
        "Raw arguments",
        '"quantity": 100',
    ):
        assert part in text, (part, text)


# ---- 6. expiry is configurable --------------------------------------------------------------------
async def test_approval_expiry_is_configurable(tmp_path, write_count):
    from agent.providers.scripted import ScriptedClient

    script = ScriptedClient([reply(tool_calls=[("write_file", {"path": "t.txt", "content": "x"})])])
    h = Harness(tmp_path / "home", FakeBotAPI(), script, {"TAPEBOT_AGENT__APPROVAL_TTL_MINUTES": "5"})
    try:
        await h.start()
        h.api.push_text(ALICE, "write t", user_id=ALICE)
        card = await card_in(h.api, ALICE)
        row = approval_row(h.home, approval_id(card))
        span = datetime.fromisoformat(row["expires_at"]) - datetime.fromisoformat(row["created_at"])
        assert span.total_seconds() == 5 * 60
        assert "in 5 min" in card["text"]
    finally:
        await h.stop()


def test_the_readme_states_the_approval_rules_truthfully():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "hours later" not in readme
    for part in ("approval_ttl_minutes", "/rules", "tapebot rules", "standing_approval_hours", "好"):
        assert part in readme, part


# ---- policy records are not reachable by the model ------------------------------------------------
async def test_no_tool_the_model_can_call_changes_standing_approvals(harness):
    """A18 (self-modification of policy): the model's tools do not include anything that lists,
    adds or revokes standing approvals; only /rules, `tapebot rules` and a human's tap do."""
    app = await harness.start()
    names = {spec.name for spec in app.runtime.tools.specs()}
    assert names and not {n for n in names if "rule" in n or "approv" in n or "standing" in n}


# ---- Discord: the same card, the same rules ---------------------------------------------------------
async def test_discord_shows_the_same_card_and_rules_work_there(discord_app):
    from tests.bot.test_bot_discord_card import embed_text
    from tests.bot.test_bot_discord_flow import ADMIN as D_ADMIN
    from tests.bot.test_bot_discord_flow import CHANNEL as D_CHANNEL
    from tests.bot.test_bot_discord_flow import GUILD as D_GUILD
    from tests.bot.test_bot_discord_flow import USER as D_USER
    from tests.bot.test_bot_discord_flow import components

    fake, script, start, home = discord_app
    await start()
    script.add(reply(tool_calls=[("execute_trade", BUY)]), reply("Bought on Discord."))
    await fake.push_dm(channel_id=300, user_id=D_USER, content="buy 100 moutai")
    card = await fake.wait_for(lambda: next((m for m in fake.bot_messages(300) if components(m)), None))
    for part in ("贵州茅台 (600519)", "BUY 100", "PAPER", "Last price", "2025-09-03", "Estimated amount",
                 t("en", "card_who_dm"), "Expires", "buy 600519 ≤ 100 per order", "Raw arguments"):  # fmt: skip
        assert part in embed_text(card), part  # an embed (tests/bot/test_bot_discord_card.py)
    always = next(c for c in components(card) if c["custom_id"].startswith("tb:a:"))
    await fake.push_button(always["custom_id"], message_id=card["id"], user_id=D_USER, channel_id=300)
    await fake.wait_for(lambda: any("Bought on Discord." in m["content"] for m in fake.bot_messages(300)))
    await fake.push_slash("rules", user_id=D_USER, channel_id=300)
    await fake.wait_for(lambda: any("buy 600519" in f["message"]["content"] for f in fake.followups))
    # in a guild, typed consent from the admin must mention the bot or reply to the card
    script.add(reply(tool_calls=[("write_file", {"path": "dg.txt", "content": "x"})]), reply("Saved dg."))
    await fake.push_guild_message(D_GUILD, D_CHANNEL, D_USER, "write dg.txt", mention_bot=True)
    gcard = await fake.wait_for(
        lambda: next((m for m in fake.bot_messages(D_CHANNEL) if components(m)), None)
    )
    assert t("en", "card_who_group") in embed_text(gcard)
    # as a person would, answer once the turn waits for it (its progress line shows ⏸)
    await fake.wait_for(lambda: any("⏸" in m["content"] for m in fake.bot_messages(D_CHANNEL)))
    await fake.push_guild_message(D_GUILD, D_CHANNEL, D_ADMIN, "yes", mention_bot=True)
    await fake.wait_for(lambda: any("Saved dg." in m["content"] for m in fake.bot_messages(D_CHANNEL)))
    assert (home / "workspace" / "dg.txt").exists()
