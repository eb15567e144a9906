"""Inbound messages survive storage faults. With the database write-locked by
another process beyond the busy timeout, or the disk full, a message is kept in memory and retried
with backoff (not acknowledged to Telegram while its handler holds it), the chat is told the bot
cannot keep up, and the message is answered once the lock clears or space returns. After the retry
budget the user is asked to send it again: never silence. Fake Telegram Bot API → adapter →
gateway → runtime → real SQLite; the lock is a real second process."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from agent.errors import StorageError
from agent.providers.scripted import ScriptedClient, reply
from bot.retry import StorageRetry
from tests.bot.conftest import ALICE, Harness
from tests.bot.test_bot_received_restart import pending_texts
from tests.fakes.telegram_api import FakeBotAPI
from tests.fakes.waits import eventually

FAST = StorageRetry(first_s=0.05, max_s=0.2, budget_s=600.0)
LOCKER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=30)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
db.rollback()
db.close()
"""


class FullDisk:
    """Stands in for a store method: fails as SQLite does on a full disk (SQLITE_FULL) until
    `space` is set, then calls the real one; `refused` counts the failed calls."""

    def __init__(self, real: Callable[..., Awaitable[Any]]):
        self.real, self.space, self.refused = real, asyncio.Event(), 0

    async def __call__(self, *args: Any, **kw: Any) -> Any:
        if not self.space.is_set():
            self.refused += 1
            raise StorageError("database error (tapebot.db): database or disk is full")
        return await self.real(*args, **kw)


def trouble(api: FakeBotAPI) -> list[str]:
    return [t for t in api.texts(ALICE) if "trouble saving" in t]


async def test_a_message_waits_out_a_database_locked_by_another_process(tmp_path):
    api = FakeBotAPI()
    h = Harness(tmp_path / "home", api, ScriptedClient([reply("Stored and answered.")]))
    locker = None
    try:
        app = await h.start()
        app.gateway.retry.policy = FAST
        locker = await asyncio.create_subprocess_exec(
            sys.executable, "-c", LOCKER, str(h.home / "tapebot.db"),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert locker.stdout is not None and locker.stdin is not None
        assert (await asyncio.wait_for(locker.stdout.readline(), 30)).strip() == b"locked"
        uid = api.push_text(ALICE, "hello while locked", user_id=ALICE)
        await api.wait_for(lambda: trouble(api), timeout=30)  # after the 5 s busy timeout
        assert api.confirmed_offset <= uid  # not acknowledged: Telegram would redeliver it
        assert h.script.requests == []
        locker.stdin.write(b"go\n")  # the lock clears
        await locker.stdin.drain()
        await locker.wait()
        await api.wait_for(lambda: any("Stored and answered." in t for t in api.texts(ALICE)), timeout=30)
        assert [m.text for m in h.script.requests[0].messages if m.role == "user"] == ["hello while locked"]
        assert len(trouble(api)) == 1  # told once, not at every retry
        await api.wait_for(lambda: api.confirmed_offset > uid, timeout=10)
        assert await pending_texts(h.home) == []
    finally:
        if locker is not None and locker.returncode is None:
            locker.kill()
            await locker.wait()
        await h.stop()


async def test_a_message_waits_out_a_full_disk(tmp_path):
    """The disk is full (SQLite's SQLITE_FULL, injected at the store) for the first writes."""
    api = FakeBotAPI()
    h = Harness(tmp_path / "home", api, ScriptedClient([reply("Got it now."), reply("And the second.")]))
    try:
        app = await h.start()
        app.gateway.retry.policy = FAST
        store = app.gateway.store
        store.receive_message = disk = FullDisk(store.receive_message)
        api.push_text(ALICE, "first", user_id=ALICE)
        api.push_text(ALICE, "second", user_id=ALICE)
        await api.wait_for(lambda: trouble(api), timeout=10)
        await eventually(lambda: disk.refused >= 4)  # several retries fail meanwhile
        assert h.script.requests == []
        disk.space.set()  # space returns
        await api.wait_for(lambda: any("Got it now." in t for t in api.texts(ALICE)), timeout=10)
        # both are answered, in order: folded into one turn or the second in a turn of its own
        await api.wait_for(lambda: pending_texts_now(h) == [], timeout=10)
        # the second's record is cleared as its turn starts, before its model call
        await api.wait_for(lambda: any(_users(r)[-1:] == ["second"] for r in h.script.requests), timeout=10)
        last = h.script.requests[-1]
        users = [m.text for m in last.messages if m.role == "user"]
        assert users == ["first", "second"]
        assert len(trouble(api)) == 1
    finally:
        await h.stop()


def _users(request) -> list[str]:
    return [m.text for m in request.messages if m.role == "user"]


def pending_texts_now(h: Harness) -> list[str]:
    import sqlite3

    db = sqlite3.connect(h.home / "tapebot.db")
    try:
        return [r[0] for r in db.execute("SELECT pending FROM processed_updates WHERE pending IS NOT NULL")]
    finally:
        db.close()


async def test_after_the_retry_budget_the_user_is_asked_to_send_again(tmp_path):
    api = FakeBotAPI()
    h = Harness(tmp_path / "home", api, ScriptedClient())
    try:
        app = await h.start()
        app.gateway.retry.policy = StorageRetry(first_s=0.05, max_s=0.1, budget_s=0.3)
        store = app.gateway.store
        store.receive_message = FullDisk(store.receive_message)  # and space never returns
        api.push_text(ALICE, "lost cause", user_id=ALICE)
        await api.wait_for(lambda: any("send it again" in t for t in api.texts(ALICE)), timeout=10)
        assert h.script.requests == []
    finally:
        await h.stop()


async def test_a_turns_own_first_write_waits_out_a_full_disk(tmp_path):
    """The inbound message was stored; the turn's first write (the message into the history with
    its turn record) meets a full disk. It is retried with the same policy, the chat is told once,
    and the message is answered when the write succeeds: no generic error, no wait for a restart."""
    api = FakeBotAPI()
    h = Harness(tmp_path / "home", api, ScriptedClient([reply("Answered after all.")]))
    try:
        app = await h.start()
        app.gateway.retry.policy = FAST
        store = app.runtime.store
        store.commit = disk = FullDisk(store.commit)
        api.push_text(ALICE, "hello on a full disk", user_id=ALICE)
        await api.wait_for(lambda: trouble(api), timeout=10)
        await api.wait_for(lambda: disk.refused >= 3, timeout=10)  # retried meanwhile
        assert h.script.requests == []
        assert not any("went wrong" in t for t in api.texts(ALICE))
        disk.space.set()
        await api.wait_for(lambda: any("Answered after all." in t for t in api.texts(ALICE)), timeout=10)
        assert [m.text for m in h.script.requests[0].messages if m.role == "user"] == ["hello on a full disk"]
        assert len(trouble(api)) == 1
        assert not any("went wrong" in t for t in api.texts(ALICE))
        assert pending_texts_now(h) == []
    finally:
        await h.stop()


async def test_a_turns_own_first_write_waits_out_a_lock_held_by_another_process(tmp_path):
    api = FakeBotAPI()
    h = Harness(tmp_path / "home", api, ScriptedClient([reply("Answered once the lock cleared.")]))
    locker = None
    try:
        app = await h.start()
        app.gateway.retry.policy = FAST
        store = app.runtime.store
        real = store.commit
        locked = asyncio.Event()

        async def lock_then_commit(*args, **kw):
            nonlocal locker
            if locker is None:  # the inbound record is in; now another process takes the lock
                locker = await asyncio.create_subprocess_exec(
                    sys.executable, "-c", LOCKER, str(h.home / "tapebot.db"),
                    stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                )  # fmt: skip
                assert locker.stdout is not None
                assert (await asyncio.wait_for(locker.stdout.readline(), 30)).strip() == b"locked"
                locked.set()
            return await real(*args, **kw)

        store.commit = lock_then_commit
        api.push_text(ALICE, "hello while the turn is locked out", user_id=ALICE)
        await api.wait_for(lambda: trouble(api), timeout=30)  # after the 5 s busy timeout
        assert h.script.requests == []
        assert locker is not None and locker.stdin is not None
        locker.stdin.write(b"go\n")
        await locker.stdin.drain()
        await locker.wait()
        await api.wait_for(
            lambda: any("Answered once the lock cleared." in t for t in api.texts(ALICE)), timeout=30
        )
        assert len(trouble(api)) == 1
        assert not any("went wrong" in t for t in api.texts(ALICE))
        assert pending_texts_now(h) == []
    finally:
        if locker is not None and locker.returncode is None:
            locker.kill()
            await locker.wait()
        await h.stop()
