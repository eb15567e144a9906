"""A background task's notice is delivered only by a process that serves its chat's platform.

The interactive console (`tapebot chat`) serves the terminal only, and a one-shot turn
(`tapebot chat -m`) serves no chat at all. Neither may claim a Telegram chat's notice — at start-up
or in the heartbeat sweep that reports tasks lost by a dead process — or the notice would be
marked delivered and never reach the chat; it stays pending for the `tapebot run` that serves it."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from adapters.base import ChatAdapter, SentMessage
from agent.background_tasks import TaskManager
from agent.errors import NoticeDeferred
from agent.providers.scripted import ScriptedClient
from agent.task_ledger import TaskRecord
from bot.app import App
from memory.chat_tables import ChatRecord
from memory.tasks import SqlTaskStore
from tests.bot.conftest import make_settings


class Terminal(ChatAdapter):
    """A chat adapter serving the terminal platform only, recording what it is asked to send."""

    platform = "terminal"

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def start(self, handler):
        pass

    async def stop(self):
        pass

    async def send_text(self, chat, text, *, buttons=None, reply_to=None, format="markdown"):
        self.sent.append(text)
        return SentMessage(chat, str(len(self.sent)))

    async def edit_text(self, msg, text, *, buttons=None, format="markdown"):
        pass

    async def send_typing(self, chat):
        pass

    async def send_image(self, chat, path, caption=""):  # pragma: no cover
        raise NotImplementedError

    async def set_commands(self, commands, *, translations=None):
        pass


def _done(task_id: str, chat_key: str) -> TaskRecord:
    now = datetime.now(UTC)
    return TaskRecord(
        id=task_id,
        session_id=chat_key,
        chat_key=chat_key,
        tool_name="run_backtest",
        status="succeeded",
        result="42 trades",
        created_at=now,
        started_at=now,
        finished_at=now,
    )


async def _seed(settings, *records: TaskRecord, chats: tuple[ChatRecord, ...] = ()) -> None:
    """The database as a `tapebot run` left it: known chats, tasks whose notices are unsent."""
    app = App(settings, model_factory=lambda _m: ScriptedClient())
    await app.start(adapters=False)
    try:
        assert app.db is not None and app.store is not None
        for chat in chats:
            await app.store.save_chat(chat)
        for record in records:
            await SqlTaskStore(app.db).insert_task(record)
    finally:
        await app.stop()


TELEGRAM_CHAT = ChatRecord("tg:42", "telegram", "42", None, False, "tg:42")


async def _pending(app: App) -> list[str]:
    assert app.db is not None
    return sorted(r.id for r in await SqlTaskStore(app.db).pending_notifications())


async def test_a_one_shot_leaves_other_chats_pending_notices_for_the_bot(tmp_path):
    settings = make_settings(tmp_path / "home", {})
    await _seed(settings, _done("bg_0123456789", "tg:42"))  # finished while nobody was there

    one_shot = App(settings, model_factory=lambda _m: ScriptedClient())
    await one_shot.start(adapters=False)
    try:
        assert await _pending(one_shot) == ["bg_0123456789"]
    finally:
        await one_shot.stop()


async def test_the_console_leaves_a_telegram_chats_notice_pending(tmp_path):
    settings = make_settings(tmp_path / "home", {})
    await _seed(settings, _done("bg_telegram01", "tg:42"), chats=(TELEGRAM_CHAT,))

    console = App(settings, model_factory=lambda _m: ScriptedClient())
    await console.start(adapters=[Terminal()], scheduler=False)
    try:
        assert await _pending(console) == ["bg_telegram01"]
    finally:
        await console.stop()


async def test_a_one_shots_sweep_leaves_a_lost_tasks_notice_pending(tmp_path):
    settings = make_settings(tmp_path / "home", {})
    long_ago = datetime.now(UTC) - timedelta(hours=1)
    running = _done("bg_running001", "tg:42").model_copy(
        update={
            "status": "running",
            "result": None,
            "finished_at": None,
            "owner": "a-process-that-died",
            "heartbeat_at": long_ago,
        }
    )
    await _seed(settings, chats=(TELEGRAM_CHAT,))

    one_shot = App(settings, model_factory=lambda _m: ScriptedClient())
    await one_shot.start(adapters=False)
    try:
        assert one_shot.db is not None and one_shot.task_manager is not None
        # a `tapebot run` that dies while the one-shot runs: its task's heartbeat goes stale
        await SqlTaskStore(one_shot.db).insert_task(running)
        lost = await one_shot.task_manager.sweep()  # what the heartbeat loop runs every 30 s
        assert [r.id for r in lost] == ["bg_running001"]
        assert await _pending(one_shot) == ["bg_running001"]
    finally:
        await one_shot.stop()


async def test_a_deferred_notice_is_released_quietly(tmp_path, caplog):
    settings = make_settings(tmp_path / "home", {})
    await _seed(settings, _done("bg_deferred01", "tg:42"))
    app = App(settings, model_factory=lambda _m: ScriptedClient())
    await app.start(adapters=False)
    try:
        assert app.db is not None
        store = SqlTaskStore(app.db)

        async def not_here(record: TaskRecord) -> None:
            raise NoticeDeferred(f"no chat here serves {record.chat_key}")

        manager = TaskManager(store, on_complete=not_here)
        with caplog.at_level(logging.WARNING):
            assert await manager.notify_pending() == 0
        assert [r.id for r in await store.pending_notifications()] == ["bg_deferred01"]
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    finally:
        await app.stop()


async def test_the_console_still_delivers_its_own_chats_notice(tmp_path):
    settings = make_settings(tmp_path / "home", {})
    terminal_chat = ChatRecord("term:main", "terminal", "main", None, False, "term:main")
    await _seed(settings, _done("bg_terminal01", "term:main"), chats=(terminal_chat,))

    terminal = Terminal()
    console = App(settings, model_factory=lambda _m: ScriptedClient())
    await console.start(adapters=[terminal], scheduler=False)
    try:
        assert await _pending(console) == []
    finally:
        await console.stop()
