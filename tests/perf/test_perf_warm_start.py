"""The start-up's cache warm-up: what a first reply would build on first use is built in
the background while the chats open — the `chats` statements (a read of a row no chat has), the trace writer.
It must send nothing to any endpoint (a warm-up is never a billable call, never a message to a
user), keep nothing, and end with the App. Behaviour only, never timings."""

from __future__ import annotations

import asyncio
import sqlite3

from bot.app import App
from bot.parts import REHEARSAL_CHAT
from config.loader import load_settings
from tests.fakes.llm_server import ScriptedLLMServer
from tests.fakes.telegram_api import FakeBotAPI, FakeRequest

TOKEN = "123456:TEST-token-abcdef"
# What the warm-up may ask Telegram: the adapter's own start-up calls, nothing addressed to a chat.
STARTUP_CALLS = {"getMe", "deleteWebhook", "getUpdates", "setMyCommands", "deleteMyCommands"}


def _settings(tmp_path, llm: ScriptedLLMServer):
    env = {
        "TAPEBOT_HOME": str(tmp_path / "home"),
        "OPENAI_API_KEY": "sk-test-0123456789",
        "OPENAI_BASE_URL": llm.openai_base_url,
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "TAPEBOT_TELEGRAM__ALLOWED_USERS": "[1001]",
        "TAPEBOT_SCHEDULER__ENABLED": "false",
    }
    return load_settings(tmp_path / "home", env)


def _app(tmp_path, llm: ScriptedLLMServer, api: FakeBotAPI) -> App:
    options = {"request": FakeRequest(api), "get_updates_request": FakeRequest(api), "poll_timeout": 0.05}
    return App(_settings(tmp_path, llm), adapter_options={"telegram": options})


def _warm_task(app: App) -> asyncio.Task:
    tasks = [t for t in app._tasks if t.get_name() == "warm-caches"]
    assert len(tasks) == 1, "the warm-up is one of the App's tracked tasks"
    return tasks[0]


async def test_the_start_warms_in_the_background_and_sends_nothing(tmp_path, monkeypatch):
    """`tapebot run`'s start (real openai SDK against the scripted server, the fake Bot API)."""
    spawned: list[tuple[asyncio.Task, bool]] = []  # (the warm-up, tracked by the App when made)
    warm_caches = App.warm_caches

    def recorded(self: App) -> asyncio.Task:
        task = warm_caches(self)
        spawned.append((task, task in self._tasks))
        return task

    monkeypatch.setattr(App, "warm_caches", recorded)
    api = FakeBotAPI(token=TOKEN)
    async with ScriptedLLMServer() as llm:
        app = _app(tmp_path, llm, api)
        try:
            await app.start(adapters=True)
            # it may be done already (a quiet machine): recorded when made, not looked up later
            [(task, tracked)] = spawned
            assert tracked, "the warm-up is one of the App's tracked tasks"
            await asyncio.wait_for(asyncio.shield(task), 60)
            assert app.trace_writer._worker is not None  # the trace writer's thread is up
            assert llm.requests == []  # no model call: nothing billed
            asked = {c.method for c in api.calls}
            assert asked <= STARTUP_CALLS, asked - STARTUP_CALLS  # nothing sent to any chat
            db = sqlite3.connect(tmp_path / "home" / "tapebot.db")
            try:  # the rehearsal left no row
                for table in ("chats", "sessions", "turns"):
                    assert db.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,), table
            finally:
                db.close()
        finally:
            await app.stop()
    assert not app._tasks


async def test_the_warm_up_is_cancelled_cleanly_by_stop(tmp_path, monkeypatch):
    import bot.parts as parts

    started = asyncio.Event()

    async def stuck(store):
        started.set()
        await asyncio.Event().wait()  # never ends by itself

    monkeypatch.setattr(parts, "rehearse_chat_rows", stuck)
    api = FakeBotAPI(token=TOKEN)
    async with ScriptedLLMServer() as llm:
        app = _app(tmp_path, llm, api)
        await app.start(adapters=True)
        task = _warm_task(app)
        await asyncio.wait_for(started.wait(), 30)
        await app.stop()
        assert task.cancelled()
        assert llm.requests == []


async def test_no_warm_up_without_chats(tmp_path):
    """A one-shot turn (`tapebot chat -m`) answers at once: nothing to warm for a later reply."""
    api = FakeBotAPI(token=TOKEN)
    async with ScriptedLLMServer() as llm:
        app = _app(tmp_path, llm, api)
        try:
            await app.start(adapters=False)
            assert not [t for t in app._tasks if t.get_name() == "warm-caches"]
        finally:
            await app.stop()


def test_the_chat_key_of_the_rehearsal_is_no_real_chat_key():
    # real keys are "<platform>:<chat>[...]" with a non-empty chat id
    assert REHEARSAL_CHAT.endswith(":")
