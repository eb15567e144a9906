"""Prompt-cache share per turn with memory injection and tool calls (Anthropic).

    python -m bench.cache_prefix [--turns 20]

A 20-turn conversation runs through the real runtime, the real Anthropic client (`anthropic` SDK)
and the local scripted Anthropic endpoint. Every turn recalls memories (real `MemoryRecall` over
SQLite) and calls one tool, so each turn is two model requests. The endpoint simulates Anthropic's
prompt cache from the request body: a prefix is written at each `cache_control` breakpoint; a
request reads the longest written prefix ending at a block boundary within 20 blocks before one of
its breakpoints; prefixes under 1,024 tokens are not cached; tokens are `agent.tokens` estimates.
We print, per turn, the share of input tokens read from the cache.

Strategies:
  wrap-last-user   the seed's transient injection (`inject_recall`, what the runtime does now):
                   the newest user message is wrapped in <relevant-memories> for the call only.
  trailing         (proposal) `append_recall`: the memories go in a trailing transient message and
                   the Anthropic breakpoint sits on the last non-transient block (applied here by
                   patching `agent.runtime._inject` and the client's wire mapping).
  no-memory        no injection: the ceiling.

Target: ≥90% from turn 5 on. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import agent.providers.anthropic as anthropic_provider
import agent.runtime as runtime_module
from agent import events as ev
from agent.context import TaskTracker, append_recall, inject_recall
from agent.inmemory import InMemoryStore
from agent.providers import build_model_client
from agent.runtime import AgentRuntime, TurnRequest
from agent.tokens import estimate_tokens
from agent.tools.registry import Toolset
from memory.db import Database
from memory.hooks import MemoryContextHooks
from memory.longterm import MemoryStore, create_memory_schema
from memory.recall import MemoryRecall
from memory.tools import memory_tools
from tests.fakes.llm_server import Reply, ScriptedLLMServer, ToolCall

MIN_CACHEABLE = 1024
LOOKBACK = 20

market = Toolset("bench_market")


@market.tool(concurrency_safe=True)
async def analyze_stock(code: str) -> dict:
    """Analyse one stock with the Wyckoff engine: phase, events, health and the latest bars.

    Args:
        code: 6-digit code.
    """
    bars = [[20250101 + i, 1700 + i, 1712 + i, 1695 + i, 1705 + i, 31000 + 17 * i] for i in range(40)]
    return {"code": code, "phase": "accumulation", "events": ["SC", "AR", "ST", "Spring"], "bars": bars}


QUESTIONS = [
    "帮我看看贵州茅台 600519 现在的结构", "宁德时代 300750 能建仓吗", "比亚迪 002594 跌破支撑了吗",
    "平安银行 000001 的量能怎么样", "600519 的 Spring 确认了吗", "300750 回踩 20 日线了吗",
    "002594 放量冲高回落怎么办", "尾盘二次确认怎么做", "000001 仓位能加到多少", "600519 止损设在哪里",
]  # fmt: skip


class CacheSim:
    """Anthropic-style prefix cache over request bodies, answering like a model would."""

    def __init__(self) -> None:
        self.cached: set[str] = set()

    @staticmethod
    def blocks(body: dict[str, Any]) -> list[tuple[dict[str, Any], bool]]:
        out: list[tuple[dict[str, Any], bool]] = []
        for tool in body.get("tools", []):
            out.append((tool, "cache_control" in tool))
        for block in body.get("system", []) or []:
            out.append((block, "cache_control" in block))
        for message in body.get("messages", []):
            content = message["content"]
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            for i, block in enumerate(content):
                out.append(({"role": message["role"], "i": i, **block}, "cache_control" in block))
        return out

    def __call__(self, body: dict[str, Any]) -> Reply:
        blocks = self.blocks(body)
        hashes, sizes = [], []
        h = hashlib.sha256()
        total = 0
        for block, _bp in blocks:
            clean = {k: v for k, v in block.items() if k != "cache_control"}
            text = json.dumps(clean, sort_keys=True, ensure_ascii=False)
            h.update(text.encode())
            hashes.append(h.copy().hexdigest())
            total += estimate_tokens(text)
            sizes.append(total)
        breakpoints = [i for i, (_b, bp) in enumerate(blocks) if bp]
        read_at = -1
        for bp in breakpoints:
            for j in range(bp, max(-1, bp - LOOKBACK - 1), -1):
                if hashes[j] in self.cached:
                    read_at = max(read_at, j)
                    break
        read = sizes[read_at] if read_at >= 0 else 0
        write = 0
        for bp in breakpoints:
            if sizes[bp] >= MIN_CACHEABLE and hashes[bp] not in self.cached:
                self.cached.add(hashes[bp])
                write = max(write, sizes[bp] - read)
        uncached = max(0, total - read - write)
        last = body["messages"][-1]["content"]
        answered = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
        if answered:
            return Reply(
                text="结构偏吸筹，等待回踩确认；仓位按你的纪律不超过15%。",
                input_tokens=uncached,
                cache_read=read,
                cache_write=write,
            )
        code = "600519"
        for b in last if isinstance(last, list) else []:
            found = [w for w in json.dumps(b, ensure_ascii=False).split() if w.isdigit() and len(w) == 6]
            code = found[0] if found else code
        return Reply(
            tool_calls=[ToolCall("analyze_stock", {"code": code})],
            input_tokens=uncached,
            cache_read=read,
            cache_write=write,
        )


def wire_with_transient_last(original):
    """The proposed provider rule: cache breakpoint on the last block of the newest non-transient
    message; transient messages follow it."""

    def to_wire(messages):
        stable = [m for m in messages if not m.meta.get("transient")]
        extra = [m for m in messages if m.meta.get("transient")]
        wire = original(stable)
        for m in extra:
            blocks = [{"type": "text", "text": m.text}]
            if wire and wire[-1]["role"] == "user":
                wire[-1]["content"].extend(blocks)
            else:
                wire.append({"role": "user", "content": blocks})
        return wire

    return to_wire


async def run(strategy: str, turns: int) -> list[float]:
    original_inject, original_wire = runtime_module._inject, anthropic_provider.to_wire_messages
    if strategy == "trailing":
        runtime_module._inject = append_recall
        anthropic_provider.to_wire_messages = wire_with_transient_last(original_wire)
    else:
        runtime_module._inject = inject_recall
    try:
        with tempfile.TemporaryDirectory() as tmp:
            db = Database(f"sqlite+aiosqlite:///{Path(tmp) / 'c.db'}", migrate=False)
            await db.start()
            await create_memory_schema(db)
            store = MemoryStore(db)
            for text in (
                "用户不追涨，偏好尾盘二次确认",
                "单票仓位不超过15%",
                "跌破确认支撑不买",
                "600519 周线回踩再加仓",
            ):
                await store.add(
                    "default", "preference" if "用户" in text or "仓位" in text else "decision", text
                )
            tracker = TaskTracker()
            hooks = MemoryContextHooks(recall=MemoryRecall(store), tracker=tracker)
            if strategy == "no-memory":

                async def no_recall(session_id: str, user_text: str) -> None:
                    return None

                hooks.recall = no_recall  # type: ignore[method-assign]
            async with ScriptedLLMServer() as server:
                server.default = CacheSim()
                cfg = SimpleNamespace(
                    id="main", provider="anthropic", model="claude-bench", base_url=server.base_url("anthropic"),
                    api_key="test-key", context_window=200_000, input_per_1m=3.0, output_per_1m=15.0, max_tokens=1024,
                )  # fmt: skip
                client = build_model_client(cfg, idle_timeout=30)
                rt = AgentRuntime(
                    model_for=lambda _m: client,
                    tools=Toolset.combine("all", market, memory_tools),
                    store=InMemoryStore(),
                    hooks=hooks,
                )
                shares = []
                for t in range(turns):
                    read = total = 0
                    async for event in rt.run(
                        TurnRequest(session_id="s", text=QUESTIONS[t % len(QUESTIONS)])
                    ):
                        if isinstance(event, ev.UsageEvent):
                            read += event.usage.cache_read_tokens
                            total += event.usage.total_input
                    shares.append(read / total if total else 0.0)
                await client.aclose()
            await tracker.aclose()
            await db.close()
            return shares
    finally:
        runtime_module._inject, anthropic_provider.to_wire_messages = original_inject, original_wire


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    results = {s: await run(s, args.turns) for s in ("wrap-last-user", "trailing", "no-memory")}
    print("share of input tokens read from the prompt cache, per turn (1 tool call per turn)")
    print("turn " + "".join(f"{s:>16}" for s in results))
    for t in range(args.turns):
        print(f"{t + 1:>4} " + "".join(f"{results[s][t]:>16.0%}" for s in results))
    for s, shares in results.items():
        later = shares[4:]
        print(f"{s:<16} turns 5+: mean {sum(later) / len(later):.0%}, min {min(later):.0%}")


if __name__ == "__main__":
    asyncio.run(main())
