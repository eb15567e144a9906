"""Waiting for something to happen, without guessing how long it takes.

A test that sleeps "long enough" is slow when the machine is idle and flaky when it is loaded. These
helpers poll a condition (yielding to the event loop between looks) and fail with a clear message
after a generous timeout, so a test takes exactly as long as the code does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

POLL_S = 0.005  # between looks; short enough to add nothing a test would notice


async def eventually(condition: Callable[[], T | Awaitable[T]], *, timeout: float = 5.0, what: str = "") -> T:
    """Wait until `condition()` is truthy and return its value; raise `AssertionError` after `timeout`.

    `condition` may be a plain or an async callable. The wait uses real time because the code under
    test runs on the real event loop (its tasks, sockets and threads), even where its clock is fake.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if isinstance(value, Awaitable):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not true within {timeout} s: {what or condition}")
        await asyncio.sleep(POLL_S)


def eventually_sync(condition: Callable[[], T], *, timeout: float = 5.0, what: str = "") -> T:
    """`eventually` for code that runs in threads or other processes (no event loop in the test)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not true within {timeout} s: {what or condition}")
        time.sleep(POLL_S)
