"""Messages queued behind a running turn are not lost when the bot stops or crashes: each is
recorded with its update id until it is in the session's history, and a restart takes it up.
Fake Telegram Bot API → adapter → gateway → runtime → real SQLite, as in test_bot_telegram_flow."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from datetime import UTC, datetime, timedelta

from agent.providers.scripted import ScriptedClient, reply
from memory.db import Database
from memory.stores import SqlStore
from tests.bot.conftest import ALICE, BOB, Harness
from tests.fakes.telegram_api import FakeBotAPI, button_of


class GatedClient(ScriptedClient):
    """The first model call waits until `gate` is set: the turn stays running meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.called = asyncio.Event()
        self.gate = asyncio.Event()

    async def stream(self, request):
        first = not self.called.is_set()
        self.called.set()
        if first:
            await self.gate.wait()
        async for chunk in super().stream(request):
            yield chunk


def seen_users(req) -> list:
    return reply("Saw: " + " | ".join(m.text for m in req.messages if m.role == "user"))


async def queue_behind_a_running_turn(h: Harness) -> None:
    """ALICE starts a turn that stays running; a second message arrives and is acknowledged to
    Telegram (the offset moves past it) while it waits in the turn's queue."""
    assert isinstance(h.script, GatedClient)
    await h.start()
    h.api.push_text(ALICE, "analyze 600519", user_id=ALICE)
    await asyncio.wait_for(h.script.called.wait(), 3)
    second = h.api.push_text(ALICE, "also 000001", user_id=ALICE)
    await h.api.wait_for(lambda: h.api.confirmed_offset > second)


async def pending_texts(home) -> list[str]:
    async with Database(f"sqlite+aiosqlite:///{home / 'tapebot.db'}") as db:
        return [p.get("text") or p["notice"] for _, _, p in await SqlStore(db).received_pending()]


def backdate(home, age: timedelta, *, pending_only: bool) -> None:
    """Make the recorded update ids, and the turn the stop left open, look `age` old (the bot is
    stopped)."""
    db = sqlite3.connect(home / "tapebot.db")
    then = datetime.now(UTC) - age
    old = then.replace(tzinfo=None).isoformat(" ")
    where = " WHERE pending IS NOT NULL" if pending_only else ""
    db.execute(f"UPDATE processed_updates SET created_at = ?{where}", (old,))
    db.execute(
        "UPDATE turns SET payload = json_set(payload, '$.updated_at', ?) "
        "WHERE status IN ('running', 'suspended')",
        (then.isoformat(),),
    )
    db.commit()
    db.close()


async def test_a_message_queued_at_a_stop_is_answered_after_the_restart(tmp_path):
    h = Harness(tmp_path / "home", FakeBotAPI(), GatedClient())
    try:
        await queue_behind_a_running_turn(h)
        await h.stop()  # SIGTERM: the running turn is cancelled; the queued message starts nothing
        assert await pending_texts(h.home) == ["also 000001"]
        h.script = ScriptedClient([seen_users])
        await h.start()
        await h.api.wait_for(lambda: any("Saw:" in t for t in h.api.texts(ALICE)))
        assert [t for t in h.api.texts(ALICE) if "Saw:" in t] == ["Saw: analyze 600519 | also 000001"]
        assert len(h.script.requests) == 1
        await h.stop()
        assert await pending_texts(h.home) == []  # in the history now: nothing to take up again
        h.script = ScriptedClient()  # a third start calls no model
        await h.start()
        await asyncio.sleep(0.2)  # absence: time for a wrong re-run to call the model
        assert h.script.requests == []
    finally:
        await h.stop()


async def test_a_message_queued_at_a_crash_is_answered_after_the_restart(tmp_path):
    """The crash is the database as it was at that moment (an SQLite online backup), opened by a
    new process; nothing of the old one's memory survives."""
    h = Harness(tmp_path / "home", FakeBotAPI(), GatedClient())
    crashed = tmp_path / "crashed"
    try:
        await queue_behind_a_running_turn(h)
        shutil.copytree(h.home, crashed, ignore=shutil.ignore_patterns("tapebot.db*"))
        src, dst = sqlite3.connect(h.home / "tapebot.db"), sqlite3.connect(crashed / "tapebot.db")
        src.backup(dst)
        src.close()
        dst.close()
    finally:
        await h.stop()  # the old process goes away; its own stop is not what is tested here
    api = h.api  # the same Telegram: it knows the chat
    again = Harness(crashed, api, ScriptedClient([seen_users]))
    try:
        await again.start()
        await api.wait_for(lambda: any("Saw:" in t for t in api.texts(ALICE)))
        # the crashed turn's message is in the history; the queued one was taken up
        assert [t for t in api.texts(ALICE) if "Saw:" in t] == ["Saw: analyze 600519 | also 000001"]
        assert await pending_texts(crashed) == []
    finally:
        await again.stop()


async def test_a_message_left_from_long_ago_is_not_run_and_the_chat_is_told(tmp_path):
    h = Harness(tmp_path / "home", FakeBotAPI(), GatedClient())
    try:
        await queue_behind_a_running_turn(h)
        await h.stop()
        backdate(h.home, timedelta(hours=2), pending_only=True)
        h.script = ScriptedClient()  # must not be called
        await h.start()
        notice = await h.api.wait_for(
            lambda: next((t for t in h.api.texts(ALICE) if "before I restarted" in t), None)
        )
        assert "also 000001" in notice
        # the turn the stop interrupted is as old: closed, not resumed, and the chat is told
        await h.api.wait_for(lambda: any("too long ago" in t for t in h.api.texts(ALICE)))
        await asyncio.sleep(0.2)  # absence: time for a wrong resume to call the model
        assert h.script.requests == []
        assert await pending_texts(h.home) == []
    finally:
        await h.stop()


async def test_a_message_from_a_user_no_longer_allowed_is_not_taken_up(tmp_path):
    h = Harness(tmp_path / "home", FakeBotAPI(), GatedClient())
    try:
        await queue_behind_a_running_turn(h)
        await h.stop()
        h.extra_env = {"TAPEBOT_TELEGRAM__ALLOWED_USERS": f"[{BOB}]"}
        h.script = ScriptedClient()
        await h.start()
        await asyncio.sleep(0.2)  # absence: time for a wrong take-up to call the model
        assert h.script.requests == []
        assert await pending_texts(h.home) == []
    finally:
        await h.stop()


async def test_old_update_ids_are_forgotten_at_start_but_a_waiting_message_is_kept(tmp_path):
    h = Harness(tmp_path / "home", FakeBotAPI(), GatedClient())
    try:
        await queue_behind_a_running_turn(h)
        await h.stop()
        backdate(h.home, timedelta(days=8), pending_only=False)
        h.extra_env = {"TAPEBOT_TELEGRAM__MAX_BACKLOG_AGE_S": str(10 * 86_400)}  # still run it
        h.script = ScriptedClient([seen_users])
        await h.start()
        await h.api.wait_for(lambda: any("Saw:" in t for t in h.api.texts(ALICE)))
        await h.stop()
        db = sqlite3.connect(h.home / "tapebot.db")
        # the first message's id is forgotten; the second's was kept while it waited (and then
        # answered, so it goes at the next pruning after its week)
        left = db.execute("SELECT update_id, pending FROM processed_updates").fetchall()
        db.close()
        assert len(left) == 1 and left[0][1] is None
    finally:
        await h.stop()


async def test_a_message_waiting_behind_an_admin_approval_survives_a_restart(tmp_path):
    """In a group, a member's message waits while the chat is blocked on an approval only an
    admin can give; after a restart it still waits, and joins the turn once the admin approves."""
    from tests.bot.conftest import ADMIN
    from tests.bot.test_bot_telegram_flow import GROUP

    api = FakeBotAPI()
    h = Harness(tmp_path / "home", api, ScriptedClient())
    h.script.add(reply(tool_calls=[("write_file", {"path": "g.txt", "content": "group"})]))
    try:
        await h.start()
        api.push_text(GROUP, "@tapebot_test_bot save g.txt", user_id=BOB)
        card = await api.wait_for_card(GROUP)
        later = api.push_text(GROUP, "@tapebot_test_bot and also 000001", user_id=BOB)
        await api.wait_for(lambda: api.confirmed_offset > later)
        await h.stop()
        assert [t for t in await pending_texts(h.home) if "000001" in t]
        h.script = ScriptedClient([seen_users])
        await h.start()
        await asyncio.sleep(0.2)  # absence: time for a wrong take-up to call the model
        assert h.script.requests == []  # still waiting for the admin
        once = button_of(card, "o")
        api.push_callback(GROUP, card["message_id"], once["callback_data"], user_id=ADMIN)
        answer = await api.wait_for(lambda: next((t for t in api.texts(GROUP) if "Saw:" in t), None))
        assert "save g.txt" in answer and "and also 000001" in answer
        assert (h.home / "workspace" / "g.txt").read_text() == "group"
        assert await pending_texts(h.home) == []
    finally:
        await h.stop()


async def test_a_task_notice_waiting_for_the_running_turn_survives_a_restart(tmp_path):
    """The task ledger counts a notice delivered once the gateway took it; one that still waited
    for the chat's running turn when the bot stopped gets its turn after the restart, once."""
    from agent.task_ledger import TaskRecord

    h = Harness(tmp_path / "home", FakeBotAPI(), GatedClient())
    try:
        await h.start()
        h.api.push_text(ALICE, "analyze 600519", user_id=ALICE)
        assert isinstance(h.script, GatedClient)
        await asyncio.wait_for(h.script.called.wait(), 3)
        gw = h.app.gateway
        state = next(s for s in gw.chats.loaded() if gw.lanes.of(s).is_running)
        record = TaskRecord(id="bg_7", session_id=state.session_id, chat_key=state.key,
                            tool_name="run_backtest", status="succeeded", result="Sharpe 1.2")  # fmt: skip
        await gw.notices.notify_task(record)
        await gw.notices.notify_task(record)  # a second delivery of the same notice changes nothing
        assert gw.lanes.of(state).notices_waiting == 1
        await h.stop()
        assert len(await pending_texts(h.home)) == 1

        def notice_turn(req):
            last = req.messages[-1]
            assert last.meta.get("notification") and "bg_7" in last.text and "Sharpe 1.2" in last.text
            return reply("Your backtest bg_7 finished.")

        def resumed_turn(req):
            assert req.messages[-1].text == "analyze 600519"
            return reply("600519 is in phase C.")

        # the turn the stop interrupted is resumed first; the notice gets its own turn after it
        h.script = ScriptedClient([resumed_turn, notice_turn])
        await h.start()
        await h.api.wait_for(lambda: any("bg_7 finished" in t for t in h.api.texts(ALICE)))
        await asyncio.sleep(0.2)  # absence: time for a third, wrong turn to call the model
        assert len(h.script.requests) == 2
        assert await pending_texts(h.home) == []
    finally:
        await h.stop()
