"""bench/chat_throughput.py at a tiny load: both runs (the bot, and the harness-only echo that gives
the ceiling) deliver every reply exactly once. Nothing here looks at time; this keeps the bench
from rotting and checks the property its figures rest on (no lost or repeated replies)."""

from __future__ import annotations

import gc
import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "chat_throughput.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_chat_throughput", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


@pytest.mark.parametrize("which", ["run_bot", "run_baseline"])
async def test_every_reply_arrives_once(bench, which):
    load = bench.Load(chats=3, messages=2, latency=0.01)
    threshold = gc.get_threshold()
    try:
        result = await getattr(bench, which)(load)
    finally:  # the bench settles the heap as `tapebot run` does; the test process goes on
        gc.unfreeze()
        gc.set_threshold(*threshold)
    assert sorted(result.replies) == sorted(f"u{u} m{i}" for u in bench.users(load) for i in range(2))
    assert all(len(times) == 1 for times in result.replies.values())
    assert len(result.latencies) == 6
