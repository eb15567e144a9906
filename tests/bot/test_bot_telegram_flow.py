"""The product's front door end to end: fake Telegram Bot API (python-telegram-bot's request hook)
→ adapter → gateway → runtime (scripted model) → real SQLite → replies, cards and buttons."""

from __future__ import annotations

import asyncio

from agent.providers.scripted import ScriptedClient, reply
from bot.i18n import t
from tests.bot.conftest import ADMIN, ALICE, BOB, ON_BOTH_DATABASES
from tests.fakes.telegram_api import button_of, buttons_of

GROUP = -100500


async def test_dm_message_gets_an_answer(harness):
    harness.script.add(reply("Hello! 600519 looks fine as of 2025-09-03."))
    await harness.start()
    harness.api.push_text(ALICE, "hi", user_id=ALICE)
    await harness.api.wait_for(lambda: any("600519 looks fine" in t for t in harness.api.texts(ALICE)))


async def test_unknown_user_is_denied_and_the_model_is_never_called(harness):
    await harness.start()
    harness.api.push_text(4242, "hi", user_id=4242)
    await harness.api.wait_for(lambda: any("4242" in t for t in harness.api.texts(4242)))
    assert harness.script.requests == []


@ON_BOTH_DATABASES
async def test_approval_card_tap_executes_exactly_once(harness, tmp_path):
    harness.script.add(
        reply(tool_calls=[("write_file", {"path": "plan.txt", "content": "max 15% per position"})]),
        reply("Saved your plan."),
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "save my plan", user_id=ALICE)
    card = await api.wait_for_card(ALICE)
    assert "write_file" in card["text"] and "15%" in card["text"]
    once = button_of(card, "o")
    assert len(once["callback_data"].encode()) <= 64
    api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
    await api.wait_for(lambda: any("Saved your plan." in t for t in api.texts(ALICE)))
    target = harness.home / "workspace" / "plan.txt"
    assert target.read_text() == "max 15% per position"
    # a second tap (double tap / replay) changes nothing and is answered
    target.unlink()
    n_answers = len(api.calls_to("answerCallbackQuery"))
    api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
    await api.wait_for(lambda: len(api.calls_to("answerCallbackQuery")) > n_answers)
    await asyncio.sleep(0.1)  # absence: time for the replayed tap to write again
    assert not target.exists()
    # the card shows its final state, without buttons
    final = api.messages[(ALICE, card["message_id"])]
    assert "Approved" in final["text"] and not buttons_of(final)


async def test_forged_callback_does_nothing(harness):
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "/help", user_id=ALICE)
    help_msg = await api.wait_for(lambda: next(iter(api.sent(ALICE)), None))
    api.push_callback(ALICE, help_msg["message_id"], "o:forged-id-123", user_id=ALICE)
    await api.wait_for(lambda: api.calls_to("answerCallbackQuery"))
    assert harness.script.requests == []


async def test_group_member_who_is_not_an_approver_cannot_decide(harness):
    harness.script.add(
        reply(tool_calls=[("write_file", {"path": "g.txt", "content": "group"})]),
        reply("Done."),
    )
    await harness.start()
    api = harness.api
    api.push_text(GROUP, "@tapebot_test_bot save g.txt", user_id=BOB)
    card = await api.wait_for_card(GROUP)
    once = button_of(card, "o")
    api.push_callback(GROUP, card["message_id"], once["callback_data"], user_id=BOB)  # requester, not admin
    await api.wait_for(lambda: api.calls_to("answerCallbackQuery"))
    answer = api.calls_to("answerCallbackQuery")[-1].params
    assert "Only an admin of this group" in answer.get("text", "")
    assert not (harness.home / "workspace" / "g.txt").exists()
    api.push_callback(GROUP, card["message_id"], once["callback_data"], user_id=ADMIN)
    await api.wait_for(lambda: (harness.home / "workspace" / "g.txt").exists())


@ON_BOTH_DATABASES
async def test_restart_between_card_and_tap(harness):
    harness.script.add(reply(tool_calls=[("write_file", {"path": "r.txt", "content": "after restart"})]))
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "write r.txt", user_id=ALICE)
    card = await api.wait_for_card(ALICE)
    await harness.stop()
    harness.script.add(reply("Written after the restart."))
    await harness.start()
    once = button_of(card, "o")
    api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
    await api.wait_for(lambda: any("Written after the restart." in t for t in api.texts(ALICE)))
    assert (harness.home / "workspace" / "r.txt").read_text() == "after restart"


@ON_BOTH_DATABASES
async def test_text_yes_approves_and_no_denies(harness):
    harness.script.add(
        reply(tool_calls=[("write_file", {"path": "y.txt", "content": "1"})]),
        reply("ok 1"),
        reply(tool_calls=[("write_file", {"path": "n.txt", "content": "2"})]),
        reply("not written"),
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "write y", user_id=ALICE)
    await api.wait_for(lambda: any(buttons_of(m) for m in api.sent(ALICE)))
    api.push_text(ALICE, "好的", user_id=ALICE)
    await api.wait_for(lambda: any("ok 1" in t for t in api.texts(ALICE)))
    assert (harness.home / "workspace" / "y.txt").exists()
    api.push_text(ALICE, "write n", user_id=ALICE)
    await api.wait_for(lambda: sum(1 for m in api.sent(ALICE) if "n.txt" in m.get("text", "")) >= 1)
    api.push_text(ALICE, "不", user_id=ALICE)
    await api.wait_for(lambda: any("not written" in t for t in api.texts(ALICE)))
    assert not (harness.home / "workspace" / "n.txt").exists()


@ON_BOTH_DATABASES
async def test_question_answered_by_number_and_by_button(harness):
    harness.script.add(
        reply(
            tool_calls=[
                ("ask_user", {"question": "Which phase filter?", "options": ["Spring", "SOS", "LPS"]})
            ]
        ),
        lambda req: [*reply(f"You picked {req.messages[-1].tool_results[0].content}")],
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "screen for me", user_id=ALICE)
    q = await api.wait_for(
        lambda: next((m for m in api.sent(ALICE) if "Which phase" in m.get("text", "")), None)
    )
    assert [b["text"] for b in buttons_of(q)] == ["Spring", "SOS", "LPS"]
    api.push_text(ALICE, "the second one", user_id=ALICE)
    await api.wait_for(lambda: any("You picked" in t and "SOS" in t for t in api.texts(ALICE)))


async def test_new_command_while_waiting_moves_on(harness):
    harness.script.add(
        reply(tool_calls=[("ask_user", {"question": "Which one?", "options": ["A", "B"]})]),
        reply("Fresh start."),
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "pick", user_id=ALICE)
    await api.wait_for(lambda: any("Which one?" in t for t in api.texts(ALICE)))
    api.push_text(ALICE, "/new", user_id=ALICE)
    await api.wait_for(lambda: any("new conversation" in t for t in api.texts(ALICE)))
    api.push_text(ALICE, "hello", user_id=ALICE)
    await api.wait_for(lambda: any("Fresh start." in t for t in api.texts(ALICE)))
    # the new session's history starts clean
    assert [m.role for m in harness.script.requests[-1].messages] == ["user"]


@ON_BOTH_DATABASES
async def test_message_during_a_running_turn_is_folded_in(harness):
    def first(req):
        return reply(tool_calls=[("update_plan", {"steps": [{"text": "look", "status": "in_progress"}]})])

    def second(req):
        users = [m.text for m in req.messages if m.role == "user"]
        return reply("Saw: " + " | ".join(users))

    harness.script.add(first, second)
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "analyze 600519", user_id=ALICE)
    api.push_text(ALICE, "also 000001", user_id=ALICE)
    await api.wait_for(lambda: any("Saw:" in t for t in api.texts(ALICE)))
    # the second message joined the running turn (folded into a model call), not dropped
    assert len(harness.script.requests) == 2
    assert any("Saw: analyze 600519 | also 000001" in t for t in api.texts(ALICE)), api.texts(ALICE)


async def test_two_chats_run_in_parallel(harness):
    order = []
    harness.script.add(
        lambda r: (order.append(r.messages[-1].text), reply("one"))[1],
        lambda r: (order.append(r.messages[-1].text), reply("two"))[1],
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "from alice", user_id=ALICE)
    api.push_text(BOB, "from bob", user_id=BOB)
    await api.wait_for(lambda: api.texts(ALICE) and api.texts(BOB))
    assert sorted(order) == ["from alice", "from bob"]


async def test_long_answer_is_split_without_losing_characters(harness):
    code = "```python\n" + "\n".join(f"print({i})  # line {i}" for i in range(300)) + "\n```"
    prose = "\n\n".join(f"Paragraph {i}: " + "word " * 60 for i in range(20))
    long_text = prose + "\n\n" + code
    assert len(long_text) > 10_000
    harness.script.add(reply(long_text))
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "long please", user_id=ALICE)
    await api.wait_for(lambda: any("line 299" in t for t in api.texts(ALICE)), timeout=10)
    chunks = [t for t in api.texts(ALICE)]
    assert all(len(t) <= 4096 for t in chunks) and len(chunks) >= 3
    joined = "".join(chunks)
    for i in (0, 150, 299):
        assert f"print({i})  # line {i}" in joined
    assert joined.count("Paragraph") == 20


async def test_status_and_unknown_command(harness):
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "/status", user_id=ALICE)
    await api.wait_for(lambda: any("Session" in t for t in api.texts(ALICE)))
    api.push_text(ALICE, "/frobnicate", user_id=ALICE)
    await api.wait_for(lambda: any("Unknown command" in t for t in api.texts(ALICE)))


async def test_chinese_client_gets_chinese_words(harness):
    await harness.start()
    api = harness.api
    api.user(2001, "张三", "zh-hans")
    harness.app.gateway.access.platforms["telegram"].allowed_users.add("2001")
    api.push_text(2001, "/help", user_id=2001)
    await api.wait_for(lambda: any("命令" in t for t in api.texts(2001)))


async def test_approval_cannot_be_resolved_from_another_chat(harness):
    harness.script.add(reply(tool_calls=[("write_file", {"path": "x.txt", "content": "x"})]))
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "write x", user_id=ALICE)
    card = await api.wait_for_card(ALICE)
    approval_id = buttons_of(card)[0]["callback_data"].split(":", 1)[1]
    # Alice, in a group chat, tries to approve her DM's card by id
    api.push_text(GROUP, f"/approve {approval_id}", user_id=ALICE)
    await api.wait_for(lambda: any(f"There is no approval “{approval_id}”" in t for t in api.texts(GROUP)))
    assert not (harness.home / "workspace" / "x.txt").exists()


async def test_approval_flow_on_postgresql(tmp_path):
    """The same approve-once flow with PostgreSQL as the database (CI starts a server and sets
    TAPEBOT_TEST_POSTGRES_URL; skipped without one)."""
    from agent.providers.scripted import ScriptedClient
    from tests.bot.conftest import Harness
    from tests.fakes.telegram_api import FakeBotAPI
    from tests.pg import fresh_postgres

    url = await fresh_postgres()
    api = FakeBotAPI()
    h = Harness(tmp_path / "home", api, ScriptedClient(), extra_env={"TAPEBOT_DATABASE_URL": url})
    h.script.add(
        reply(tool_calls=[("write_file", {"path": "pg.txt", "content": "on postgres"})]), reply("Done.")
    )
    try:
        await h.start()
        api.push_text(ALICE, "write pg.txt", user_id=ALICE)
        card = await api.wait_for_card(ALICE)
        once = button_of(card, "o")
        api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
        api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
        await api.wait_for(lambda: any("Done." in t for t in api.texts(ALICE)))
        assert (h.home / "workspace" / "pg.txt").read_text() == "on postgres"
    finally:
        await h.stop()


async def test_pairing_code_admits_its_first_user_once(tmp_path, capsys):
    from agent.providers.scripted import ScriptedClient
    from tests.bot.conftest import Harness
    from tests.fakes.telegram_api import FakeBotAPI

    api = FakeBotAPI()
    h = Harness(tmp_path / "home", api, ScriptedClient(), extra_env={"TAPEBOT_TELEGRAM__PAIRING": "true"})
    try:
        await h.start()
        code = capsys.readouterr().err.split("pairing code ")[1].split()[0]
        api.push_text(7777, "/pair 000000" if code != "000000" else "/pair 111111", user_id=7777)
        await api.wait_for(lambda: any("7777" in t for t in api.texts(7777)))  # wrong code: still denied
        api.push_text(7777, f"/pair {code}", user_id=7777)
        await api.wait_for(lambda: any("Paired" in t for t in api.texts(7777)))
        api.push_text(8888, f"/pair {code}", user_id=8888)  # single use
        await api.wait_for(lambda: any("8888" in t for t in api.texts(8888)))
        assert not any("Paired" in t for t in api.texts(8888))
        await h.stop()
        await h.start()  # the pairing survives a restart
        api.push_text(7777, "/help", user_id=7777)
        await api.wait_for(lambda: any("Commands" in t for t in api.texts(7777)))
    finally:
        await h.stop()


async def test_group_sessions_per_user_keep_members_apart(tmp_path):
    """`group_sessions = "per_user"`: in one group each member has a conversation of their own
    (Discord's setting reaches its gateway the same way)."""
    from tests.bot.conftest import Harness
    from tests.fakes.telegram_api import FakeBotAPI

    def history(req):
        return reply("History: " + " | ".join(m.text for m in req.messages if m.role == "user"))

    env = {"TAPEBOT_TELEGRAM__GROUP_SESSIONS": "per_user", "TAPEBOT_DISCORD__GROUP_SESSIONS": "per_user"}
    h = Harness(tmp_path / "home", FakeBotAPI(), ScriptedClient([history, history]), env)
    try:
        app = await h.start()
        assert app.gateway.access.platforms["discord"].group_sessions == "per_user"
        h.api.push_text(GROUP, "@tapebot_test_bot from alice", user_id=ALICE)
        await h.api.wait_for(lambda: any("History:" in t for t in h.api.texts(GROUP)))
        h.api.push_text(GROUP, "@tapebot_test_bot from bob", user_id=BOB)
        await h.api.wait_for(lambda: sum("History:" in t for t in h.api.texts(GROUP)) == 2)
        answers = [t for t in h.api.texts(GROUP) if "History:" in t]
        assert answers == ["History: from alice", "History: from bob"]  # the mention is stripped
    finally:
        await h.stop()


def _users_seen(req):
    return reply("Saw: " + " | ".join(m.text for m in req.messages if m.role == "user"))


async def test_a_member_message_behind_an_admin_approval_joins_once_it_is_decided(harness):
    harness.script.add(reply(tool_calls=[("write_file", {"path": "b.txt", "content": "x"})]), _users_seen)
    await harness.start()
    api = harness.api
    api.push_text(GROUP, "@tapebot_test_bot save b.txt", user_id=BOB)
    card = await api.wait_for_card(GROUP)
    api.push_text(GROUP, "@tapebot_test_bot and also 000001", user_id=BOB)  # BOB cannot approve
    await api.wait_for(lambda: t("en", "held_until_decided") in api.texts(GROUP))  # held, not a new turn
    assert len(harness.script.requests) == 1  # it waits; the card is not "moved on"
    once = button_of(card, "o")
    api.push_callback(GROUP, card["message_id"], once["callback_data"], user_id=ADMIN)
    answer = await api.wait_for(lambda: next((t for t in api.texts(GROUP) if "Saw:" in t), None))
    assert answer == "Saw: save b.txt | and also 000001"


async def test_a_member_message_behind_an_approval_that_expires_gets_its_own_turn(harness):
    from datetime import UTC, datetime, timedelta

    harness.script.add(
        reply(tool_calls=[("write_file", {"path": "e.txt", "content": "x"})]),
        reply("Not written: the approval expired."),
        _users_seen,
    )
    app = await harness.start()
    api = harness.api
    api.push_text(GROUP, "@tapebot_test_bot save e.txt", user_id=BOB)
    await api.wait_for(lambda: any(buttons_of(m) for m in api.sent(GROUP)))
    api.push_text(GROUP, "@tapebot_test_bot and also 000001", user_id=BOB)
    await api.wait_for(lambda: t("en", "held_until_decided") in api.texts(GROUP))  # it waits for the card
    assert await app.gateway.waiting.expire_due(now=datetime.now(UTC) + timedelta(hours=1)) == 1
    answer = await api.wait_for(lambda: next((t for t in api.texts(GROUP) if "Saw:" in t), None))
    assert "and also 000001" in answer
    assert any("approval expired" in t for t in api.texts(GROUP))
    assert not (harness.home / "workspace" / "e.txt").exists()
