"""A one-shot turn (`tapebot chat -m`, the App started without chats) has nobody to tell about
other chats' background tasks that finished while the bot was down: their notices stay pending
for the next `tapebot run`, which delivers them — the one-shot must not claim them."""

from __future__ import annotations

from datetime import UTC, datetime

from agent.providers.scripted import ScriptedClient
from agent.task_ledger import TaskRecord
from bot.app import App
from memory.tasks import SqlTaskStore
from tests.bot.conftest import make_settings


async def test_a_one_shot_leaves_other_chats_pending_notices_for_the_bot(tmp_path):
    settings = make_settings(tmp_path / "home", {})
    first = App(settings, model_factory=lambda _m: ScriptedClient())
    await first.start(adapters=False)
    assert first.db is not None
    store = SqlTaskStore(first.db)
    now = datetime.now(UTC)
    done = TaskRecord(
        id="bg_0123456789",
        session_id="tg:42",
        chat_key="tg:42",
        tool_name="run_backtest",
        status="succeeded",
        result="42 trades",
        created_at=now,
        started_at=now,
        finished_at=now,
    )
    await store.insert_task(done)  # finished while nobody was there to be told
    await first.stop()

    one_shot = App(settings, model_factory=lambda _m: ScriptedClient())
    await one_shot.start(adapters=False)
    try:
        assert one_shot.db is not None
        pending = await SqlTaskStore(one_shot.db).pending_notifications()
        assert [r.id for r in pending] == [done.id]
    finally:
        await one_shot.stop()
