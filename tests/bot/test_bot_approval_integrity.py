"""Approval integrity end to end:
fake Telegram Bot API → adapter → gateway → runtime (scripted model) → real SQLite.

Every test drives the bot through the fake and checks the one thing that must not happen (a model
call for someone who is not allowed, a tool that runs without a valid decision, a second run)
against an observable effect: the file `write_file` would create, a count of its executions, the
approval row in the database, the card's final text and the callback answers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from adapters.base import ButtonPress, ChatRef, UserRef
from agent.approval import new_approval_id
from agent.providers.scripted import ScriptedClient, reply
from bot import chat_setup
from bot.i18n import t
from tests.bot.conftest import ADMIN, ALICE, BOB, Harness
from tests.fakes.telegram_api import FakeBotAPI, buttons_of

GROUP = -100777
STRANGER = 4242
MENTION = "@tapebot_test_bot"
EXPIRED = t("en", "expired")
STALE = t("en", "approval_stale")
NO_ANSWER = "No answer before the approval expired"
UNDELIVERABLE = "could not be delivered"


# ---- helpers -----------------------------------------------------------------------------------


def cards_in(api: FakeBotAPI, chat_id: int) -> list[dict]:
    return [
        m for m in api.sent(chat_id) if any(b["callback_data"][:2] in ("o:", "d:") for b in buttons_of(m))
    ]


async def card_in(api: FakeBotAPI, chat_id: int) -> dict:
    return await api.wait_for(lambda: next(iter(cards_in(api, chat_id)), None))


def data_of(card: dict, kind: str) -> str:
    return next(b["callback_data"] for b in buttons_of(card) if b["callback_data"].startswith(f"{kind}:"))


def approval_id_of(card: dict) -> str:
    return data_of(card, "o").split(":", 1)[1]


def current(api: FakeBotAPI, chat_id: int, card: dict) -> dict:
    """The card as the chat shows it now (edits applied)."""
    return api.messages[(chat_id, card["message_id"])]


def tap(api: FakeBotAPI, chat_id: int, message_id: int, data: str, user_id: int) -> str:
    """Push a callback query; returns its callback_query id (to find its answer)."""
    uid = api.push_callback(chat_id, message_id, data, user_id=user_id)
    return api.pushed[uid]["callback_query"]["id"]


def answer_to(api: FakeBotAPI, callback_id: str) -> dict | None:
    return next((a for a in api.callback_answers if a["callback_query_id"] == callback_id), None)


def db(home) -> sqlite3.Connection:
    return sqlite3.connect(home / "tapebot.db")


async def tamper(fn) -> None:
    """A write behind the running bot's back, from a thread: a blocking write on the event loop
    would wait for a write transaction the bot cannot finish while the loop is blocked."""
    await asyncio.to_thread(fn)


def approval_row(home, approval_id: str) -> dict:
    con = db(home)
    con.row_factory = sqlite3.Row
    row = con.execute("SELECT * FROM approvals WHERE id = ?", (approval_id,)).fetchone()
    con.close()
    assert row is not None, approval_id
    return dict(row)


def backdate_approval(home, approval_id: str, *, turn_too: bool) -> None:
    """The approval (and, with `turn_too`, its turn's waiting state) expired a minute ago."""
    past = datetime.now(UTC) - timedelta(minutes=1)
    con = db(home)
    con.execute(
        "UPDATE approvals SET expires_at = ? WHERE id = ?",
        (past.replace(tzinfo=None).isoformat(" "), approval_id),
    )
    if turn_too:
        turn_id = con.execute("SELECT turn_id FROM approvals WHERE id = ?", (approval_id,)).fetchone()[0]
        con.execute(
            "UPDATE turns SET payload = json_set(payload, '$.waiting.expires_at', ?) WHERE id = ?",
            (past.isoformat(), turn_id),
        )
    con.commit()
    con.close()


def tool_results(req) -> list[str]:
    return [r.content for m in req.messages for r in (getattr(m, "tool_results", None) or [])]


def workspace(h: Harness):
    return h.home / "workspace"


@pytest.fixture
def write_count(monkeypatch) -> list[str]:
    """Every execution of write_file, by path (the tool itself still runs)."""
    import agent.tools.builtin as builtin

    runs: list[str] = []
    real = builtin.write_file_impl

    def counting(policy, path, content):
        runs.append(path)
        return real(policy, path, content)

    monkeypatch.setattr(builtin, "write_file_impl", counting)
    return runs


# ---- empty allowlist -----------------------------------------------------------------------
async def test_empty_allowlist_warns_at_start_and_a_dm_reaches_no_model_and_no_tool(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    env = {"TAPEBOT_TELEGRAM__ALLOWED_USERS": "[]", "TAPEBOT_TELEGRAM__ADMINS": "[]"}
    script = ScriptedClient([reply(tool_calls=[("write_file", {"path": "open.txt", "content": "x"})])])
    h = Harness(tmp_path / "home", FakeBotAPI(), script, env)
    try:
        await h.start()
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert any("telegram" in w and "allowed_users" in w for w in warnings), warnings
        h.api.push_text(ALICE, "write open.txt", user_id=ALICE)
        await h.api.wait_for(lambda: any(str(ALICE) in t for t in h.api.texts(ALICE)))
        await asyncio.sleep(0.1)  # absence: time for a wrong turn to start
        assert h.script.requests == []
        assert not (workspace(h) / "open.txt").exists()
        assert not cards_in(h.api, ALICE)
    finally:
        await h.stop()


# ---- an allowed group, a member who is not allowed ------------------------------------------
async def test_a_group_member_not_on_the_allowlist_reaches_no_model(harness):
    def history(req):
        return reply("Saw: " + " | ".join(m.text for m in req.messages if m.role == "user"))

    harness.script.add(reply("Hello group."), history)
    await harness.start()
    api = harness.api
    api.push_text(GROUP, f"{MENTION} hi", user_id=ALICE)
    bot_msg = await api.wait_for(
        lambda: next((m for m in api.sent(GROUP) if m.get("text") == "Hello group."), None)
    )
    # a stranger mentions the bot, replies to it, and tries a command
    api.push_text(GROUP, f"{MENTION} write evil1.txt", user_id=STRANGER)
    api.push_text(GROUP, "write evil2.txt", user_id=STRANGER, reply_to=bot_msg["message_id"])
    api.push_text(GROUP, "/new", user_id=STRANGER)
    # an allowed member afterwards: the chat's lane handled the stranger's updates before this one
    api.push_text(GROUP, f"{MENTION} ping", user_id=ALICE)
    answer = await api.wait_for(lambda: next((t for t in api.texts(GROUP) if t.startswith("Saw:")), None))
    assert answer == "Saw: hi | ping"  # same session (no /new), nothing of the stranger's
    assert len(harness.script.requests) == 2
    assert not any(str(STRANGER) in t for t in api.texts(GROUP))  # strangers are not answered in groups
    assert not list(workspace(harness).glob("evil*"))


# ---- forged callback_data ------------------------------------------------------------------
async def test_a_real_approval_id_from_another_chat_in_callback_data_does_nothing(harness):
    harness.script.add(
        reply(tool_calls=[("write_file", {"path": "a5.txt", "content": "alice"})]), reply("Saved.")
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "write a5", user_id=ALICE)
    card = await card_in(api, ALICE)
    aid = approval_id_of(card)
    # BOB, in his own DM, sends Alice's approval id (a custom client can put anything in data)
    api.push_text(BOB, "/help", user_id=BOB)
    bob_msg = await api.wait_for(lambda: next(iter(api.sent(BOB)), None))
    forged = [
        tap(api, BOB, bob_msg["message_id"], f"o:{aid}", BOB),
        tap(api, BOB, bob_msg["message_id"], f"a:{aid}", BOB),
        tap(api, BOB, bob_msg["message_id"], f"d:{aid}", BOB),
    ]
    # Alice herself, in a group, with her DM's approval id
    api.push_text(GROUP, "/help", user_id=ALICE)
    group_msg = await api.wait_for(lambda: next(iter(api.sent(GROUP)), None))
    forged.append(tap(api, GROUP, group_msg["message_id"], f"o:{aid}", ALICE))
    await api.wait_for(lambda: all(answer_to(api, c) for c in forged))
    await asyncio.sleep(0.1)  # absence: time for a forged tap to decide
    assert approval_row(harness.home, aid)["status"] == "pending"
    assert not (workspace(harness) / "a5.txt").exists()
    assert len(harness.script.requests) == 1
    assert buttons_of(current(api, ALICE, card)), "the real card was not touched"
    # the real approval is still live: Alice's own tap on her card works
    tap(api, ALICE, card["message_id"], data_of(card, "o"), ALICE)
    await api.wait_for(lambda: "Saved." in api.texts(ALICE))
    assert (workspace(harness) / "a5.txt").read_text() == "alice"


async def test_a_guessed_approval_id_does_nothing_while_a_real_one_is_pending(harness):
    harness.script.add(
        reply(tool_calls=[("write_file", {"path": "a5g.txt", "content": "x"})]), reply("Saved.")
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "write a5g", user_id=ALICE)
    card = await card_in(api, ALICE)
    aid = approval_id_of(card)
    near_miss = aid[:-1] + ("A" if aid[-1] != "A" else "B")
    guesses = [f"o:{new_approval_id()}", f"a:{new_approval_id()}", f"d:{near_miss}", f"o:{near_miss}", "o:1"]
    ids = [tap(api, ALICE, card["message_id"], g, ALICE) for g in guesses]
    await api.wait_for(lambda: all(answer_to(api, c) for c in ids))
    await asyncio.sleep(0.1)  # absence: time for a guessed id to decide
    assert all(answer_to(api, c).get("text") == STALE for c in ids)
    assert approval_row(harness.home, aid)["status"] == "pending"
    assert not (workspace(harness) / "a5g.txt").exists()
    assert len(harness.script.requests) == 1
    assert buttons_of(current(api, ALICE, card))
    tap(api, ALICE, card["message_id"], data_of(card, "o"), ALICE)
    await api.wait_for(lambda: "Saved." in api.texts(ALICE))
    assert (workspace(harness) / "a5g.txt").read_text() == "x"


# ---- a tap after a restart, on an approval that expired meanwhile ----------------------------
@pytest.mark.parametrize("turn_too", [True, False], ids=["all-expired", "approval-row-expired"])
async def test_after_a_restart_a_tap_on_an_approval_that_expired_meanwhile_runs_nothing(
    harness, write_count, turn_too
):
    harness.script.add(reply(tool_calls=[("write_file", {"path": "a7.txt", "content": "late"})]))
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "write a7", user_id=ALICE)
    card = await card_in(api, ALICE)
    aid = approval_id_of(card)
    assert not (workspace(harness) / "a7.txt").exists()  # nothing runs before a decision
    await harness.stop()
    await tamper(lambda: backdate_approval(harness.home, aid, turn_too=turn_too))
    harness.script.add(reply("Not written: it expired."))
    await harness.start()
    cb = tap(api, ALICE, card["message_id"], data_of(card, "o"), ALICE)
    await api.wait_for(lambda: answer_to(api, cb))
    await api.wait_for(lambda: EXPIRED in current(api, ALICE, card).get("text", ""))
    await api.wait_for(lambda: "Not written: it expired." in api.texts(ALICE))
    await asyncio.sleep(0.1)  # absence: time for the expired call to run after all
    assert not buttons_of(current(api, ALICE, card))
    assert approval_row(harness.home, aid)["status"] == "expired"
    assert write_count == [] and not (workspace(harness) / "a7.txt").exists()
    assert NO_ANSWER in tool_results(harness.script.requests[-1])[-1]


# ---- the expiry sweep ----------------------------------------------------------------------
async def test_the_expiry_sweep_expires_the_card_tells_the_model_and_a_later_tap_runs_nothing(
    harness, write_count, monkeypatch
):
    monkeypatch.setattr(chat_setup, "EXPIRY_SWEEP_SECONDS", 0.05)
    harness.script.add(
        reply(tool_calls=[("write_file", {"path": "a8.txt", "content": "x"})]), reply("Not written.")
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "write a8", user_id=ALICE)
    card = await card_in(api, ALICE)
    aid = approval_id_of(card)
    await asyncio.sleep(0.2)  # the sweeper ran a few times: nothing is due yet
    assert approval_row(harness.home, aid)["status"] == "pending" and buttons_of(current(api, ALICE, card))
    await tamper(lambda: backdate_approval(harness.home, aid, turn_too=True))  # its time ran out
    final = await api.wait_for(lambda: (m := current(api, ALICE, card)).get("edit_date") and m)
    assert EXPIRED in final["text"] and not buttons_of(final)
    await api.wait_for(lambda: "Not written." in api.texts(ALICE))
    assert len(harness.script.requests) == 2
    assert NO_ANSWER in tool_results(harness.script.requests[1])[-1]
    assert approval_row(harness.home, aid)["status"] == "expired"
    cb = tap(api, ALICE, card["message_id"], data_of(card, "o"), ALICE)
    await api.wait_for(lambda: answer_to(api, cb))
    await asyncio.sleep(0.15)  # absence: time for the late tap to run the call
    assert answer_to(api, cb).get("text") == STALE
    assert write_count == [] and not (workspace(harness) / "a8.txt").exists()
    assert len(harness.script.requests) == 2
    assert approval_row(harness.home, aid)["status"] == "expired"


# ---- the card cannot be delivered -----------------------------------------------------------
async def test_an_undeliverable_card_is_denied_at_once_never_allowed(harness, write_count):
    harness.script.add(
        reply(tool_calls=[("write_file", {"path": "a9.txt", "content": "x"})]), reply("I could not ask you.")
    )
    await harness.start()
    api = harness.api
    blocked = (403, {"ok": False, "error_code": 403, "description": "Forbidden: bot was blocked by the user"})
    api.fail_when("sendMessage", blocked, match=lambda p: bool(p.get("reply_markup")))
    api.push_text(ALICE, "write a9", user_id=ALICE)
    # promptly: well before any expiry (30 min), no sweep involved
    await api.wait_for(lambda: "I could not ask you." in api.texts(ALICE), timeout=3)
    assert len(harness.script.requests) == 2
    assert UNDELIVERABLE in tool_results(harness.script.requests[1])[-1]
    assert not cards_in(api, ALICE)
    con = db(harness.home)
    statuses = [r[0] for r in con.execute("SELECT status FROM approvals")]
    con.close()
    assert statuses == ["denied"]
    assert write_count == [] and not (workspace(harness) / "a9.txt").exists()


# ---- concurrent decisions -----------------------------------------------------------------
async def test_approve_and_deny_in_one_batch_make_exactly_one_decision(harness, write_count):
    harness.script.add(
        reply(tool_calls=[("write_file", {"path": "a10.txt", "content": "x"})]), reply("Finished.")
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "write a10", user_id=ALICE)
    card = await card_in(api, ALICE)
    aid = approval_id_of(card)
    # both queued before the poller wakes: one getUpdates batch
    taps = [
        tap(api, ALICE, card["message_id"], data_of(card, "o"), ALICE),
        tap(api, ALICE, card["message_id"], data_of(card, "d"), ALICE),
        tap(api, ALICE, card["message_id"], data_of(card, "o"), ALICE),
    ]
    await api.wait_for(lambda: "Finished." in api.texts(ALICE))
    await api.wait_for(lambda: all(answer_to(api, c) for c in taps))
    await asyncio.sleep(0.2)  # absence: time for a second decision to run the call again
    status = approval_row(harness.home, aid)["status"]
    assert status in ("approved", "denied")
    assert len(write_count) == (1 if status == "approved" else 0)
    assert len(harness.script.requests) == 2  # the turn was resumed once
    final = current(api, ALICE, card)["text"]
    assert ("Approved by" in final) != ("Denied by" in final)
    assert sum(1 for c in taps if answer_to(api, c).get("text") == STALE) == 2
    results = tool_results(harness.script.requests[1])
    assert len(results) == 1


async def test_two_admins_tapping_allow_at_once_run_the_action_once(tmp_path, write_count):
    env = {"TAPEBOT_TELEGRAM__ADMINS": f"[{ADMIN},{ALICE}]"}
    h = Harness(tmp_path / "home", FakeBotAPI(), ScriptedClient(), env)
    h.script.add(
        reply(tool_calls=[("write_file", {"path": "g10.txt", "content": "x"})]), reply("Group done.")
    )
    try:
        await h.start()
        api = h.api
        api.push_text(GROUP, f"{MENTION} write g10", user_id=BOB)
        card = await card_in(api, GROUP)
        aid = approval_id_of(card)
        once = data_of(card, "o")
        taps = [
            tap(api, GROUP, card["message_id"], once, ADMIN),
            tap(api, GROUP, card["message_id"], once, ALICE),
        ]
        await api.wait_for(lambda: "Group done." in api.texts(GROUP))
        await api.wait_for(lambda: all(answer_to(api, c) for c in taps))
        await asyncio.sleep(0.2)  # absence: time for the second tap to run the call again
        assert write_count == ["g10.txt"]
        assert approval_row(h.home, aid)["status"] == "approved"
        assert current(api, GROUP, card)["text"].count("Approved by") == 1
        assert [answer_to(api, c).get("text") for c in taps].count(STALE) == 1
        assert len(h.script.requests) == 2
    finally:
        await h.stop()


async def test_decisions_racing_inside_the_gateway_resolve_once(harness, write_count):
    """The Telegram adapter serialises one chat's updates; Discord and webhooks need not. Here
    three presses reach the gateway's handler concurrently (no per-chat lane)."""
    harness.script.add(
        reply(tool_calls=[("write_file", {"path": "r10.txt", "content": "x"})]), reply("Raced.")
    )
    app = await harness.start()
    api = harness.api
    api.push_text(ALICE, "write r10", user_id=ALICE)
    card = await card_in(api, ALICE)
    aid = approval_id_of(card)
    acks: list[tuple[str, str]] = []

    def press(n: int, data: str) -> ButtonPress:
        async def ack(text: str = "", alert: bool = False) -> None:
            acks.append((data, text))

        return ButtonPress(
            update_id=f"race{n}",
            chat=ChatRef("telegram", str(ALICE), None, False, "U"),
            user=UserRef("telegram", str(ALICE), "Alice", "en"),
            data=data,
            message_id=str(card["message_id"]),
            ack=ack,
            sent_at=datetime.now(UTC),
        )

    presses = [press(1, data_of(card, "o")), press(2, data_of(card, "d")), press(3, data_of(card, "a"))]
    await asyncio.gather(*(app.gateway.handle(p) for p in presses))
    await api.wait_for(lambda: "Raced." in api.texts(ALICE))
    await asyncio.sleep(0.2)  # absence: time for a losing press to run the call
    status = approval_row(harness.home, aid)["status"]
    assert status in ("approved", "denied")
    assert len(write_count) == (1 if status == "approved" else 0)
    assert len(harness.script.requests) == 2
    assert len(acks) == 3 and [text for _, text in acks].count(STALE) == 2
    assert len(tool_results(harness.script.requests[1])) == 1


# ---- two chats, two approvals at once ------------------------------------------------------
async def test_two_chats_raise_approvals_at_once_each_card_in_its_own_chat(harness):
    def write_for_sender(req):
        who = req.messages[-1].text.split()[-1]
        return reply(tool_calls=[("write_file", {"path": f"{who}.txt", "content": who})])

    harness.script.add(write_for_sender, write_for_sender)
    harness.script.default = reply("Done.")
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "write alice", user_id=ALICE)
    api.push_text(BOB, "write bob", user_id=BOB)
    card_a, card_b = await card_in(api, ALICE), await card_in(api, BOB)
    assert "alice.txt" in card_a["text"] and "bob.txt" not in card_a["text"]
    assert "bob.txt" in card_b["text"] and "alice.txt" not in card_b["text"]
    assert len(cards_in(api, ALICE)) == 1 and len(cards_in(api, BOB)) == 1
    a_id, b_id = approval_id_of(card_a), approval_id_of(card_b)
    # Alice tries to decide Bob's approval from her chat, by text
    api.push_text(ALICE, f"/approve {b_id}", user_id=ALICE)
    api.push_text(ALICE, f"/deny {b_id}", user_id=ALICE)
    # another chat's id is, for this chat, no approval at all
    await api.wait_for(lambda: api.texts(ALICE).count(t("en", "approval_unknown_id", id=b_id)) == 2)
    await asyncio.sleep(0.1)  # absence: time for the other chat's id to decide
    assert approval_row(harness.home, b_id)["status"] == "pending"
    assert approval_row(harness.home, a_id)["status"] == "pending"
    assert not (workspace(harness) / "bob.txt").exists()
    assert buttons_of(current(api, BOB, card_b))
    assert len(harness.script.requests) == 2
    # Bob's own decision still works
    api.push_text(BOB, f"/approve {b_id}", user_id=BOB)
    await api.wait_for(lambda: "Done." in api.texts(BOB))
    assert (workspace(harness) / "bob.txt").read_text() == "bob"
    assert not (workspace(harness) / "alice.txt").exists()


# ---- parameters changed between the card and the tap ---------------------------------------
async def test_a_tampered_approval_hash_is_refused_as_a_mismatch(harness, write_count):
    harness.script.add(reply(tool_calls=[("write_file", {"path": "a13.txt", "content": "shown"})]))
    harness.script.default = reply("Stopped.")
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "write a13", user_id=ALICE)
    card = await card_in(api, ALICE)
    aid = approval_id_of(card)

    def rewrite() -> None:
        con = db(harness.home)
        con.execute(
            "UPDATE approvals SET args_hash = ?, arguments = ? WHERE id = ?",
            ("0" * 64, json.dumps({"path": "a13.txt", "content": "other"}), aid),
        )
        con.commit()
        con.close()

    await tamper(rewrite)
    tap(api, ALICE, card["message_id"], data_of(card, "o"), ALICE)
    # the approval does not match the call: the call is not run; a fresh card asks again
    fresh = await api.wait_for(
        lambda: next((c for c in cards_in(api, ALICE) if approval_id_of(c) != aid), None)
    )
    await asyncio.sleep(0.2)  # absence: time for the mismatched call to run after all
    assert write_count == [] and not (workspace(harness) / "a13.txt").exists()
    assert '"shown"' in fresh["text"]  # it asks about the call as it really is
    assert len(harness.script.requests) == 1


async def test_tool_arguments_changed_after_the_card_are_not_run_on_the_old_approval(harness, write_count):
    harness.script.add(reply(tool_calls=[("write_file", {"path": "safe.txt", "content": "shown"})]))
    harness.script.default = reply("Stopped.")
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "write safe", user_id=ALICE)
    card = await card_in(api, ALICE)
    aid = approval_id_of(card)
    # the stored call (what would run on resume) is rewritten behind the card's back

    def rewrite() -> None:
        con = db(harness.home)
        rows = con.execute("SELECT id, session_id, payload FROM messages WHERE role = 'assistant'").fetchall()
        (row_id, session_id, payload), *_ = [r for r in rows if "safe.txt" in r[2]]
        con.execute(
            "UPDATE messages SET payload = ? WHERE id = ?", (payload.replace("safe.txt", "evil.txt"), row_id)
        )
        bumped = (datetime.now(UTC) + timedelta(seconds=1)).replace(tzinfo=None).isoformat(" ")
        con.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (bumped, session_id))
        con.commit()
        con.close()

    await tamper(rewrite)
    tap(api, ALICE, card["message_id"], data_of(card, "o"), ALICE)
    fresh = await api.wait_for(
        lambda: next((c for c in cards_in(api, ALICE) if approval_id_of(c) != aid), None)
    )
    await asyncio.sleep(0.2)  # absence: time for the changed call to run after all
    assert write_count == []
    assert not (workspace(harness) / "evil.txt").exists() and not (workspace(harness) / "safe.txt").exists()
    assert "evil.txt" in fresh["text"]  # the changed action needs its own approval
    assert len(harness.script.requests) == 1
