"""`tapebot run`: the bot as a long-running process — logging, signals, the App, and the heap
settled once everything is built."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal

from bot.app import App
from bot.logs import configure_logging
from bot.signals import on_signals
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
    app = App(settings)
    stop = asyncio.Event()
    on_signals((signal.SIGTERM, signal.SIGINT), stop.set)
    await app.start(adapters=True, before_open=settle_heap)
    log.info("tapebot is running; press Ctrl-C to stop")
    try:
        await stop.wait()
    finally:
        log.info("stopping…")
        await app.stop()
    return 0
