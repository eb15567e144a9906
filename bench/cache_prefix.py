"""Prompt-cache share per turn with memory recall and tool calls (Anthropic), on the real code path.

    python -m bench.cache_prefix [--turns 20]

The real composition root (`bot.app.App`: migrated SQLite, SqlStore, the full tool set with the
bundled market data, `build_memory_hooks` recall with TaskState and dynamic snapshots) drives a
conversation through the real Anthropic client (`anthropic` SDK) against the local scripted
Anthropic endpoint (tests/fakes/llm_server.py). Per-call context travels the way production sends
it: `agent.context_hooks.context_text` → `ModelRequest.context` → `anthropic.to_wire_messages`, which
puts it after the sliding cache breakpoint. Nothing in the runtime is patched.

Every turn recalls memories (four seeded ones plus the session's TaskState) and calls one real
tool (`analyze_stock`, no chart), so each turn is two model requests. Memory upkeep (TaskState,
extraction) runs on its own model id (`[memory] model = "mem"`) and is drained after each turn, so
the next turn recalls the fresh TaskState, as in the app.

The endpoint simulates Anthropic's prompt cache from the request body, per model: a prefix is
written at each `cache_control` breakpoint; a request reads the longest written prefix ending at a
block boundary within 20 blocks before one of its breakpoints; prefixes under 1,024 tokens are not
cached; tokens are `agent.tokens` estimates. We print, per turn, the share of input tokens read
from the cache (both requests of the turn).

Rows:
  context          what the app does: recall etc. in `ModelRequest.context`, after the breakpoint.
  wrap-last-user   the older approach, for comparison: a client wrapper moves the context into the
                   newest user message (`wrap_recall`) for the call only, as `inject_recall` did.
  no-memory        `[memory] enabled = false`: no recall, the ceiling.

Target: ≥90% from turn 5 on. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import json
import logging
import re
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent import events as ev
from agent.approval import Requester
from agent.context_hooks import RECALL_TRAILER, wrap_recall
from agent.messages import Message, TextPart
from agent.providers import build_model_client
from agent.providers.base import Chunk, ModelClient, ModelRequest
from agent.runtime import TurnRequest
from agent.tokens import estimate_tokens
from bench._env import footer, header
from bot.app import App
from config.loader import load_settings
from tests.fakes.llm_server import Reply, ScriptedLLMServer, ToolCall

MIN_CACHEABLE = 1024
LOOKBACK = 20
CHAT_MODEL, MEMORY_MODEL = "claude-bench", "claude-bench-memory"
USER = "bench-user"
SESSION = "bench:session"

QUESTIONS = [
    "帮我看看贵州茅台 600519 现在的结构", "宁德时代 300750 能建仓吗", "比亚迪 002594 跌破支撑了吗",
    "平安银行 000001 的量能怎么样", "600519 的 Spring 确认了吗", "300750 回踩 20 日线了吗",
    "002594 放量冲高回落怎么办", "尾盘二次确认怎么做", "000001 仓位能加到多少", "600519 止损设在哪里",
]  # fmt: skip
MEMORIES = [
    ("preference", "用户不追涨，偏好尾盘二次确认"),
    ("preference", "单票仓位不超过15%"),
    ("decision", "跌破确认支撑不买"),
    ("decision", "600519 周线回踩再加仓"),
]
TASKSTATE = {
    "goal": "为几只白马股制定建仓计划",
    "open_loops": ["确认 600519 的 Spring", "300750 是否回踩 20 日线"],
    "important_facts": ["单票仓位不超过15%", "不追涨"],
    "last_decision": {"action": "等待回踩确认", "reason": "结构偏吸筹", "still_valid": True},
}
CODE_RE = re.compile(r"(?<!\d)(\d{6})(?!\d)")


def with_text(message: Message, text: str) -> Message:
    """A copy whose text parts are replaced by one text part (the recall injection's shape)."""
    others = [p for p in message.parts if not isinstance(p, TextPart)]
    return message.model_copy(update={"parts": (TextPart(text=text), *others)})


class CacheSim:
    """Anthropic-style prefix cache over request bodies (one cache per model), answering like a
    model would: a tool call for a new question, a short answer after the tool result; the memory
    model answers TaskState with JSON and extraction with "无"."""

    def __init__(self) -> None:
        self.cached: dict[str, set[str]] = {}

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

    def usage(self, body: dict[str, Any]) -> tuple[int, int, int]:
        """(uncached input, cache read, cache write) of this request; records the writes."""
        cached = self.cached.setdefault(str(body.get("model")), set())
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
                if hashes[j] in cached:
                    read_at = max(read_at, j)
                    break
        read = sizes[read_at] if read_at >= 0 else 0
        write = 0
        for bp in breakpoints:
            if sizes[bp] >= MIN_CACHEABLE and hashes[bp] not in cached:
                cached.add(hashes[bp])
                write = max(write, sizes[bp] - read)
        return max(0, total - read - write), read, write

    def __call__(self, body: dict[str, Any]) -> Reply:
        uncached, read, write = self.usage(body)
        tokens = {"input_tokens": uncached, "cache_read": read, "cache_write": write}
        last = body["messages"][-1]["content"]
        if body.get("model") == MEMORY_MODEL:
            prompt = json.dumps(body.get("system", ""), ensure_ascii=False)
            answer = json.dumps(TASKSTATE, ensure_ascii=False) if "TaskState" in prompt else "无"
            return Reply(text=answer, **tokens)
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            return Reply(text="结构偏吸筹，等待回踩确认；仓位按你的纪律不超过15%。", **tokens)
        # the question is the newest stored text block (context blocks may follow it)
        texts = (
            [b.get("text", "") for b in last if b.get("type") == "text"] if isinstance(last, list) else [last]
        )
        question = next(
            (t for t in texts if "<relevant-memories>" not in t and t != RECALL_TRAILER), texts[0]
        )
        found = CODE_RE.findall(question.split("<current-user-message>")[-1])
        code = found[0] if found else "600519"
        return Reply(tool_calls=[ToolCall("analyze_stock", {"code": code, "chart": False})], **tokens)


class WrapLastUser:
    """The older injection, as a client wrapper: the call's context goes into the newest user
    message (`wrap_recall`) instead of after the cache breakpoint; nothing is stored."""

    def __init__(self, inner: ModelClient):
        self.inner, self.info = inner, inner.info

    def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        if not request.context:
            return self.inner.stream(request)
        recalled = request.context.replace(RECALL_TRAILER, "").strip()
        messages = list(request.messages)
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].role == "user" and not messages[i].meta.get("internal_retry"):
                messages[i] = with_text(messages[i], wrap_recall(messages[i].text, recalled))
                break
        return self.inner.stream(dataclasses.replace(request, messages=messages, context=""))

    async def aclose(self) -> None:
        await self.inner.aclose()


def write_config(home: Path, base_url: str, memory: bool) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f"""
[[models]]
id = "main"
provider = "anthropic"
model = "{CHAT_MODEL}"
base_url = "{base_url}"
api_key = "test-key"
context_window = 200000

[[models]]
id = "mem"
provider = "anthropic"
model = "{MEMORY_MODEL}"
base_url = "{base_url}"
api_key = "test-key"

[memory]
enabled = {"true" if memory else "false"}
model = "mem"

[scheduler]
enabled = false
""",
        encoding="utf-8",
    )


async def run(strategy: str, turns: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        async with ScriptedLLMServer() as server:
            server.default = CacheSim()
            write_config(home, server.base_url("anthropic"), memory=strategy != "no-memory")
            settings = load_settings(home, {"TAPEBOT_HOME": str(home)})
            clients: dict[str, ModelClient] = {}

            def model_factory(model_id: str | None) -> ModelClient:
                model_id = model_id or settings.agent.model
                if model_id not in clients:
                    client = build_model_client(settings.model(model_id), idle_timeout=30)
                    clients[model_id] = WrapLastUser(client) if model_id == "main" else client
                return clients[model_id]

            app = App(settings, model_factory=model_factory if strategy == "wrap-last-user" else None)
            await app.start(adapters=False)
            try:
                if app.memory is not None:
                    for memory_type, text in MEMORIES:
                        await app.memory.store.add(USER, memory_type, text)
                who = Requester(USER, SESSION, (USER,))
                shares = []
                for t in range(turns):
                    read = total = 0
                    request = TurnRequest(
                        SESSION, QUESTIONS[t % len(QUESTIONS)], who, system_dynamic=app.system_dynamic()
                    )
                    async for event in app.runtime.run(request):
                        if isinstance(event, ev.UsageEvent):
                            read += event.usage.cache_read_tokens
                            total += event.usage.total_input
                    shares.append(read / total if total else 0.0)
                    if app.tracker is not None:
                        await app.tracker.drain(30)  # memory upkeep lands before the next turn
            finally:
                await app.stop()
                for client in clients.values():
                    await client.aclose()
            return shares


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    header("prompt-cache share (token counts, not timings: deterministic, one run)")
    results = {s: await run(s, args.turns) for s in ("context", "wrap-last-user", "no-memory")}
    print("share of input tokens read from the prompt cache, per turn (1 tool call per turn)")
    print("turn " + "".join(f"{s:>16}" for s in results))
    for t in range(args.turns):
        print(f"{t + 1:>4} " + "".join(f"{results[s][t]:>16.0%}" for s in results))
    for s, shares in results.items():
        later = shares[4:] or shares
        print(f"{s:<16} turns 5+: mean {sum(later) / len(later):.1%}, min {min(later):.1%}")
    footer()


if __name__ == "__main__":
    asyncio.run(main())
