"""Small pieces both chat adapters use: per-chat ordering and the never-crash handler call."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from adapters.base import Inbound, InboundHandler

log = logging.getLogger(__name__)


class KeyedLocks:
    """One FIFO lock per chat key, dropped when idle: events of one chat run in arrival order,
    different chats in parallel."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock2, n = self._locks[key]
            if n <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock2, n - 1)


class InflightTracker:
    """Counts running handler calls so `stop()` can wait for them (bounded)."""

    def __init__(self) -> None:
        self._n = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def __enter__(self) -> InflightTracker:
        self._n += 1
        self._idle.clear()
        return self

    def __exit__(self, *exc: object) -> None:
        self._n -= 1
        if self._n == 0:
            self._idle.set()

    @property
    def count(self) -> int:
        return self._n

    async def wait_idle(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except TimeoutError:
            return False


async def call_handler(handler: InboundHandler, event: Inbound, *, timeout: float, platform: str) -> bool:
    """Await the gateway's handler; log (never raise) its errors. If it overruns `timeout`, leave it
    running in the background and return, so one slow event does not stall the platform."""
    task = asyncio.ensure_future(handler(event))
    try:
        await _done_or_timeout(task, timeout)  # leaves the task running on timeout
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not task.done():
        log.warning("%s handler still running after %.0f s for %s %s; continuing without it",
                    platform, timeout, type(event).__name__, event.update_id)  # fmt: skip
        task.add_done_callback(_log_late_failure)
        return False
    if task.cancelled():
        return False
    exc = task.exception()
    if exc is not None:
        log.error("%s handler failed on %s %s", platform, type(event).__name__, event.update_id, exc_info=exc)
        return False
    return True


async def _done_or_timeout(task: asyncio.Future[Any], timeout: float) -> None:
    """`asyncio.wait((task,), timeout=timeout)` for one task, without its sets (every event)."""
    if task.done():
        return
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_: object = None) -> None:
        if not waiter.done():
            waiter.set_result(None)

    timer = loop.call_later(timeout, wake)
    task.add_done_callback(wake)
    try:
        await waiter
    finally:
        timer.cancel()
        task.remove_done_callback(wake)


def _log_late_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("late handler failure", exc_info=task.exception())
