"""CancelSignal / when_set (agent/cancel.py): the turn's cancel flag calls back without a watcher
task; a plain asyncio.Event still works."""

import asyncio

from agent.cancel import CancelSignal, when_set


async def test_callbacks_run_on_the_loop_once_set_and_can_be_withdrawn():
    signal = CancelSignal()
    calls: list[str] = []
    when_set(signal, lambda: calls.append("a"))
    withdraw = when_set(signal, lambda: calls.append("b"))
    withdraw()
    signal.set()
    assert calls == []  # never inside the caller of set()
    await asyncio.sleep(0)
    assert calls == ["a"] and signal.is_set()
    signal.set()  # a second set calls nothing again
    await asyncio.sleep(0)
    assert calls == ["a"]
    await asyncio.wait_for(signal.wait(), 1)  # still an Event


async def test_an_already_set_signal_calls_back_soon_unless_withdrawn():
    signal = CancelSignal()
    signal.set()
    calls: list[int] = []
    when_set(signal, lambda: calls.append(1))
    when_set(signal, lambda: calls.append(2))()  # withdrawn at once
    await asyncio.sleep(0)
    assert calls == [1]


async def test_a_plain_event_is_watched_by_a_task():
    event = asyncio.Event()
    calls: list[int] = []
    when_set(event, lambda: calls.append(1))
    stop = when_set(event, lambda: calls.append(2))
    stop()
    event.set()
    for _ in range(3):
        await asyncio.sleep(0)
    assert calls == [1]
