"""The shared test fakes for time and callbacks behave as the tests that lean on them assume:
FakeClock's two readings move together and its sleep spends fake time; Recorder records, fails
on demand and can be waited for; `eventually` returns as soon as a condition holds and fails
clearly when it never does."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from tests.fakes.clock import FakeClock
from tests.fakes.recorder import Recorder
from tests.fakes.waits import eventually, eventually_sync

T0 = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)


def test_advance_and_set_move_both_readings_together():
    clock = FakeClock(T0, monotonic=50.0)
    clock.advance(30)
    clock.advance(days=1, seconds=0.5)
    assert clock.now() == T0 + timedelta(days=1, seconds=30.5)
    assert clock.monotonic() == 50.0 + 86_400 + 30.5
    clock.set(T0 + timedelta(days=2))
    assert clock.now() == T0 + timedelta(days=2) and clock.monotonic() == 50.0 + 2 * 86_400
    clock.set(T0)  # the wall clock may be set back; the monotonic one never goes back
    assert clock.now() == T0 and clock.monotonic() == 50.0 + 2 * 86_400


async def test_an_automatic_sleep_jumps_the_clock_and_is_recorded():
    clock = FakeClock(T0)
    before = clock.monotonic()
    await clock.sleep(90)
    await clock.sleep(0)
    assert clock.sleeps == [90, 0]
    assert clock.monotonic() == before + 90 and clock.now() == T0 + timedelta(seconds=90)


async def test_a_driven_sleep_waits_until_the_test_advances_far_enough():
    clock = FakeClock(T0, auto=False)
    sleeper = asyncio.create_task(clock.sleep(10))
    await clock.advance_when_asleep(4)
    for _ in range(5):
        await asyncio.sleep(0)
    assert not sleeper.done() and clock.sleeping == 1
    clock.advance(6)
    await asyncio.wait_for(sleeper, 5)
    assert clock.sleeping == 0


async def test_switching_auto_on_releases_a_sleep_already_waiting():
    clock = FakeClock(T0, auto=False)
    sleeper = asyncio.create_task(clock.sleep(3600))
    await asyncio.sleep(0)
    clock.auto = True
    await asyncio.wait_for(sleeper, 5)
    assert clock.now() == T0 + timedelta(hours=1)


async def test_a_recorder_records_fails_first_and_can_be_waited_for():
    seen: list[str] = []

    async def also(text: str) -> None:
        seen.append(text)

    rec = Recorder(fail=1, error=lambda: ConnectionError("down"), on=also)
    with pytest.raises(ConnectionError, match="down"):
        await rec("a")
    later = asyncio.get_running_loop().call_later(0.01, rec.sync, "b")
    assert await rec.wait_for(2) == [("a",), ("b",)]
    later.cancel()
    assert rec.events == ["a", "b"] and rec.of(str) == ["a", "b"]
    assert seen == []  # the hook runs only for calls that did not fail, and not for sync ones


async def test_eventually_returns_the_value_and_fails_with_what_it_waited_for():
    box: list[int] = []
    asyncio.get_running_loop().call_later(0.01, box.append, 7)
    assert await eventually(lambda: box and box[0]) == 7

    async def never() -> bool:
        return False

    with pytest.raises(AssertionError, match=r"not true within 0\.05 s: the sky falls"):
        await eventually(never, timeout=0.05, what="the sky falls")
    with pytest.raises(AssertionError, match=r"not true within 0\.05 s"):
        eventually_sync(lambda: False, timeout=0.05)
