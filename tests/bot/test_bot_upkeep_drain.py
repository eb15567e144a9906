"""Upkeep drains on stop: memory extraction and TaskState updates still running
when the App stops are waited for up to `[memory] upkeep_drain_s`, not cancelled; only what is still
running after that deadline is cancelled."""

from __future__ import annotations

import asyncio

from agent.providers.scripted import ScriptedClient
from bot.app import App
from tests.bot.conftest import make_settings


async def start_app(home, **env: str) -> App:
    settings = make_settings(home, {"TAPEBOT_MEMORY__ENABLED": "true", **env})
    app = App(settings, model_factory=lambda _m: ScriptedClient())
    await app.start(adapters=False)
    return app


async def test_stop_waits_for_running_upkeep(tmp_path):
    app = await start_app(tmp_path / "home")
    finished = asyncio.Event()
    release = asyncio.Event()

    async def extraction() -> None:
        await release.wait()
        await asyncio.sleep(0)
        finished.set()

    app.tracker.spawn(extraction(), name="memory-extract:test")
    stopping = asyncio.create_task(app.stop())
    await asyncio.sleep(0.05)  # absence: time for a stop that does not wait to finish
    assert not stopping.done()  # waiting for the extraction, not cancelling it
    release.set()
    await asyncio.wait_for(stopping, 10)
    assert finished.is_set()


async def test_upkeep_past_the_deadline_is_cancelled(tmp_path):
    app = await start_app(tmp_path / "home", TAPEBOT_MEMORY__UPKEEP_DRAIN_S="0.1")
    never = asyncio.Event()
    task = app.tracker.spawn(never.wait(), name="memory-extract:stuck")
    await asyncio.wait_for(app.stop(), 10)
    assert task.cancelled()
