"""Cancelling a turn: an `asyncio.Event` that can also call back when it is set.

The runtime must interrupt a model stream or a batch of tools the moment `/cancel` sets the turn's
event. A plain `Event` can only be awaited, which costs a watcher task per model call and per tool
batch (a chat's every turn). `CancelSignal` runs callbacks instead; `when_set` works with either.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class CancelSignal(asyncio.Event):
    """An `asyncio.Event` whose `set()` also schedules the registered callbacks (on the loop, as
    a future's done-callbacks are: never inside the caller of `set`)."""

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: list[Callable[[], None]] = []

    def set(self) -> None:
        if self.is_set():
            return
        super().set()
        callbacks, self._callbacks = self._callbacks, []
        if callbacks:
            loop = asyncio.get_running_loop()
            for callback in callbacks:
                loop.call_soon(callback)

    def add_callback(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback()` once the signal is set (soon, if it already is). Returns a function
        that withdraws it."""
        if self.is_set():
            handle = asyncio.get_running_loop().call_soon(callback)
            return handle.cancel
        self._callbacks.append(callback)

        def withdraw() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return withdraw


def when_set(event: asyncio.Event, callback: Callable[[], None]) -> Callable[[], None]:
    """Call `callback()` once `event` is set; returns a function that stops waiting. Free for a
    `CancelSignal`; a plain `Event` costs a watcher task."""
    if isinstance(event, CancelSignal):
        return event.add_callback(callback)
    watcher = asyncio.ensure_future(event.wait())
    watcher.add_done_callback(lambda w: None if w.cancelled() else callback())

    def stop() -> None:
        watcher.cancel()

    return stop
