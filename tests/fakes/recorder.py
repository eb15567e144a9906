"""One recorder for every test that hands the code a callable and asks what it was called with.

`Recorder` stands in for an async (or plain) callback — an inbound handler, an `on_brief`, an
`on_switch` — and keeps every call's positional arguments in `calls`. A test can make the first
`fail` calls raise, plug extra behaviour in `on`, and wait for the n-th call instead of sleeping.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tests.fakes.waits import eventually


class Recorder:
    """Records calls; `await recorder(...)` and `recorder.sync(...)` both record."""

    def __init__(
        self,
        *,
        fail: int = 0,
        error: Callable[[], BaseException] = lambda: ConnectionError("unreachable"),
        on: Callable[..., Awaitable[None]] | None = None,
    ) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.fail = fail
        self.error = error
        self.on = on

    def sync(self, *args: Any) -> None:
        """Record a call from code that expects a plain (non-async) callback."""
        self.calls.append(args)
        if len(self.calls) <= self.fail:
            raise self.error()

    async def __call__(self, *args: Any) -> None:
        self.sync(*args)
        if self.on is not None:
            await self.on(*args)

    @property
    def events(self) -> list[Any]:
        """The first argument of each call (for one-argument handlers such as an inbound handler)."""
        return [c[0] for c in self.calls]

    def of(self, cls: type) -> list[Any]:
        """The one-argument calls whose argument is a `cls`."""
        return [e for e in self.events if isinstance(e, cls)]

    async def wait_for(self, count: int = 1, *, timeout: float = 5.0) -> list[tuple[Any, ...]]:
        """Wait until at least `count` calls have been recorded, then return them all."""
        await eventually(lambda: len(self.calls) >= count, timeout=timeout)
        return self.calls
