"""One fake clock for every test that needs time to stand still or move by hand.

Production code takes time in three shapes: an object with `now() -> datetime` (the `Clock` port), a
`Callable[[], datetime]`, or a `Callable[[], float]` of seconds (monotonic or epoch) — often with an
injectable `sleep`. `FakeClock` serves all of them from one instant: pass the clock itself where a
`Clock` is wanted, `clock.now` where a datetime callable is, and `clock.monotonic` (plus `clock.sleep`)
where seconds are. `advance` moves both readings together, so a test never keeps two times in step.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta

from tests.fakes.waits import eventually

DEFAULT_NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)  # a Monday morning, inside most trading hours
DEFAULT_MONOTONIC = 1000.0  # far from zero, so "0 means never" bugs cannot hide


class FakeClock:
    """Time that moves only when the test says so.

    With `auto=True` (the default) `await clock.sleep(s)` jumps the clock forward by `s` at once; with
    `auto=False` it waits (yielding to the loop) until the test has advanced the clock far enough, so a
    test can drive a loop that paces itself. Every requested sleep is recorded in `sleeps`.
    """

    def __init__(
        self,
        now: datetime = DEFAULT_NOW,
        *,
        monotonic: float = DEFAULT_MONOTONIC,
        auto: bool = True,
        poll: float = 0.0,
    ) -> None:
        self._now = now
        self._monotonic = monotonic
        self.auto = auto
        self.poll = poll  # real seconds between looks while a sleep waits (0: just yield)
        self.sleeps: list[float] = []
        self.sleeping = 0  # sleeps in progress

    def now(self) -> datetime:
        """The wall-clock instant (the `Clock` port, or a `Callable[[], datetime]`)."""
        return self._now

    def monotonic(self) -> float:
        """Seconds on a clock that only moves forward (a `Callable[[], float]`)."""
        return self._monotonic

    def advance(self, seconds: float = 0.0, **delta: float) -> None:
        """Move time forward: `advance(30)`, `advance(days=2)`, `advance(hours=24, seconds=1)`."""
        more = timedelta(**delta)
        self._now += timedelta(seconds=seconds) + more
        self._monotonic += seconds + more.total_seconds()  # plain float sum: no rounding to µs

    def set(self, when: datetime) -> None:
        """Jump the wall clock to `when`; the monotonic reading moves by the same amount (never back)."""
        self._monotonic += max(0.0, (when - self._now).total_seconds())
        self._now = when

    async def sleep(self, seconds: float) -> None:
        """An injectable `asyncio.sleep` that spends fake time instead of real time.

        `auto` is read on every turn of the wait, so a test that switches it on releases a sleep
        already waiting."""
        self.sleeps.append(seconds)
        target = self._monotonic + seconds
        self.sleeping += 1
        try:
            turns = 0
            while self._monotonic < target:
                if self.auto:
                    self._now += timedelta(seconds=target - self._monotonic)
                    self._monotonic = target
                await asyncio.sleep(self.poll)
                turns += 1
            if not turns:
                await asyncio.sleep(0)  # like any sleep, even of 0 s: the loop gets a turn
        finally:
            self.sleeping -= 1

    async def advance_when_asleep(self, seconds: float, *, within: float = 2.0) -> None:
        """Advance once something sleeps on this clock (waiting up to `within` real seconds), so
        the step cannot land before the sleep began; advance anyway when nothing sleeps by then."""
        with contextlib.suppress(AssertionError):
            await eventually(lambda: self.sleeping > 0, timeout=within)
        self.advance(seconds)
