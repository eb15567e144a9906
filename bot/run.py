"""`tapebot run`: the bot as a long-running process — logging, signals, the App, and the heap
settled once everything is built."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import Coroutine
from typing import Any

from bot.app import App
from bot.dbwait import wait_for_database
from bot.heartbeat import Heartbeat, heartbeat_path
from bot.logs import configure_logging
from bot.os_signals import on_signals
from config.settings import Settings

log = logging.getLogger("tapebot")

# The cyclic collector's first-generation threshold (CPython's default is 700 allocations). A busy
# chat turn allocates thousands of short-lived containers that reference counting frees anyway;
# at 700 the collector ran dozens of times per message for nothing (~10% of the CPU per message in
# `bench/chat_throughput.py`). Real cycles are still collected, a little later.
GC_GEN0_THRESHOLD = 10_000


def settle_heap() -> None:
    """Call once a long-running process has started. What exists by then (imported modules, the
    market directory, compiled statements) lives as long as the process: moving it out of the
    cyclic collector's way keeps every full collection under load from walking it again — about a
    fifth of the CPU per chat message in `bench/chat_throughput.py`. Reference counting still frees
    those objects as usual; only cycles among them would stay. Then the first generation is
    collected less often (`GC_GEN0_THRESHOLD`)."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)


async def run_bot(settings: Settings) -> int:
    """`tapebot run`: chat adapters and the scheduler in one event loop until SIGTERM/SIGINT."""
    configure_logging(
        settings.log_level,
        file=settings.log_file,
        max_bytes=settings.log.max_bytes,
        backups=settings.log.backups,
    )
    stop = asyncio.Event()
    on_signals((signal.SIGTERM, signal.SIGINT), stop.set)
    heartbeat = Heartbeat(heartbeat_path(settings.home))
    settings.ensure_dirs()
    heartbeat.start()  # `tapebot health` says "starting" from here on
    try:
        heartbeat.set("starting", "waiting for the database")
        if not await _until_stopped(wait_for_database(settings.db_url), stop):
            return 0
        heartbeat.set("starting", "building the bot")
        app = App(settings)
        await app.start(adapters=True, before_open=settle_heap)
        heartbeat.set("running")
        log.info("tapebot is running; press Ctrl-C to stop")
        try:
            await stop.wait()
        finally:
            heartbeat.set("stopping")
            log.info("stopping…")
            await app.stop()
    finally:
        await heartbeat.stop()
    return 0


async def _until_stopped(work: Coroutine[Any, Any, object], stop: asyncio.Event) -> bool:
    """Run `work` unless SIGTERM comes first (a container stopped while the database is still
    down stops at once): True when the work finished."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([task, stopper], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return False
    task.result()
    return True
