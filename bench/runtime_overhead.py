"""Runtime overhead per turn.

1. In-process: a 3-round tool turn (two tool rounds + a final answer) against an in-process
   scripted model with instant tools and the in-memory store. Everything measured is runtime.
2. The same turn with the real SQLite store (what a user actually gets).
3. The same turn through the real `openai` and `anthropic` SDKs against the local scripted server.

Prints medians; asserts nothing. Target for (1): under 5 ms per turn.
Run: python bench/runtime_overhead.py [--turns N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.approval import Requester
from agent.inmemory import InMemoryStore
from agent.runtime import AgentRuntime, TurnRequest
from agent.tools.registry import Toolset
from bench._env import footer, header
from tests.fakes.runtime_kit import Script, call, text

tools = Toolset("bench")


@tools.tool(concurrency_safe=True)
def quote(code: str) -> dict:
    """Instant tool."""
    return {"code": code, "close": 1480.55}


def script_rounds() -> list:
    return [
        [text("Checking. "), call("quote", {"code": "600519"}), call("quote", {"code": "000001"})],
        [call("quote", {"code": "300750"})],
        [text("600519 closed at 1480.55 as of 2025-09-03.")],
    ]


async def measure(runtime_factory, turns: int) -> list[float]:
    times = []
    for i in range(turns):
        runtime, script = runtime_factory()
        script.rounds = script_rounds()
        req = TurnRequest(session_id=f"s{i}", text="analyze 600519", who=Requester("u", "bench", ("u",)))
        t0 = time.perf_counter()
        async for _ in runtime.run(req):
            pass
        times.append(time.perf_counter() - t0)
    return times


async def in_process(turns: int) -> list[float]:
    store = InMemoryStore()
    script = Script([])
    rt = AgentRuntime(model_for=lambda _m: script, tools=tools, store=store)
    return await measure(lambda: (rt, script), turns)


async def with_sqlite(turns: int) -> list[float] | None:
    try:
        from memory.db import Database
        from memory.stores import SqlStore
    except ImportError:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite+aiosqlite:///{tmp}/bench.db")
        await db.start()
        try:
            store = SqlStore(db)
            script = Script([])
            rt = AgentRuntime(model_for=lambda _m: script, tools=tools, store=store)
            return await measure(lambda: (rt, script), turns)
        finally:
            await db.close()


async def with_sdk(provider: str, turns: int) -> list[float] | None:
    try:
        from agent.providers import build_model_client
        from tests.fakes.llm_server import ScriptedLLMServer
    except ImportError:
        return None
    from types import SimpleNamespace

    async with ScriptedLLMServer() as server:
        cfg = SimpleNamespace(
            id="main",
            provider=provider,
            model="bench-model",
            base_url=server.base_url(provider),
            api_key="test-key",
            context_window=None,
            input_per_1m=0.0,
            output_per_1m=0.0,
            max_tokens=1024,
        )
        client = build_model_client(cfg, idle_timeout=30)
        store = InMemoryStore()
        rt = AgentRuntime(model_for=lambda _m: client, tools=tools, store=store)
        times = []
        for i in range(turns):
            server.script_turn_for_bench()
            req = TurnRequest(session_id=f"s{i}", text="analyze 600519", who=Requester("u", "bench", ("u",)))
            t0 = time.perf_counter()
            async for _ in rt.run(req):
                pass
            times.append(time.perf_counter() - t0)
        await client.aclose()
        return times


def show(label: str, times: list[float] | None) -> None:
    if not times:
        print(f"{label:<48} (not available)")
        return
    times = times[len(times) // 10 :]  # drop warm-up
    print(
        f"{label:<48} median {statistics.median(times) * 1000:7.3f} ms   p95 "
        f"{sorted(times)[int(len(times) * 0.95) - 1] * 1000:7.3f} ms   n={len(times)}"
    )


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=300)
    args = ap.parse_args()
    header("runtime overhead")
    print("3-round tool turn (2 tool rounds, 3 tool calls, final answer)")
    show("in-process scripted model, in-memory store", await in_process(args.turns))
    show("in-process scripted model, SQLite store", await with_sqlite(max(args.turns // 3, 30)))
    show("openai SDK -> local scripted server", await with_sdk("openai", max(args.turns // 5, 30)))
    show("anthropic SDK -> local scripted server", await with_sdk("anthropic", max(args.turns // 5, 30)))
    footer()


if __name__ == "__main__":
    asyncio.run(main())
