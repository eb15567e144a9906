"""CPU per turn as one session grows: 1,000 messages in one Telegram chat, through the whole bot.

One chat sends its messages one after another through the fake Bot API, the adapter, the gateway,
the runtime (memory recall and extraction, TaskState, compaction checks, traces) and the real
SQLite store, as in `bench/chat_throughput.py`. The model is in-process and answers at once with
a sentence that quotes the message; every fourth message it first calls a tool (a small JSON
result), so the history holds what a trading chat holds. No SDK and no HTTP to the model: the
request's own JSON encoding, which must grow with the history, is not in the figures — what is
timed is tapebot's own work per turn, which should not. The model's context window is large
enough that nothing is compacted (about 120 KB of history at turn 1,000).

Prints the process CPU per message around messages 10, 100, 250, 500, 750 and 1,000 (the median
of the 9 messages around each) and the ratio to message 10's. `--profile N` prints cProfile's top
functions for the 20 messages after message N. Asserts nothing.
Run: python -m bench.long_session [--turns 1000] [--profile 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import logging
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.messages import ToolCallPart
from agent.providers.base import FinishChunk, ModelInfo, ModelRequest, TextChunk, ToolCallChunk, UsageChunk
from agent.usage import Usage
from bench._env import footer, header
from bot.app import App
from config.loader import load_settings
from tests.fakes.telegram_api import FakeBotAPI, FakeRequest

CHECKPOINTS = (10, 100, 250, 500, 750, 1000)
USER = 4242


class ChatModel:
    """Answers at once: quotes the newest user message; every fourth one after a tool call."""

    def __init__(self) -> None:
        self.info = ModelInfo(id="bench", model="bench", provider="scripted", context_window=1_000_000)
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator:
        self.calls += 1
        if "TaskState" in request.system:  # the side call that keeps the conversation's state
            yield TextChunk(
                '{"goal": "watch 600519", "open_loops": [], "important_facts": [], "last_decision": null}'
            )
            yield UsageChunk(Usage(10, 5))
            yield FinishChunk("stop")
            return
        if not request.tools:  # memory extraction: nothing worth keeping in these messages
            yield TextChunk("[]")
            yield UsageChunk(Usage(10, 5))
            yield FinishChunk("stop")
            return
        last = request.messages[-1]
        user = next(m for m in reversed(request.messages) if m.role == "user")
        number = user.text.rsplit(" ", 1)[-1].strip(")") if user.text else ""
        wants_tool = number.isdigit() and int(number) % 4 == 0 and last.role == "user"
        if wants_tool and request.tools:
            yield ToolCallChunk(
                ToolCallPart(id=f"c{self.calls}", name="get_market_price", arguments={"code": "600519"})
            )
            yield UsageChunk(Usage(10, 5))
            yield FinishChunk("tool_calls")
            return
        yield TextChunk(
            f"answer to message {number}: 600519 closed at 1480.55 as of 2025-09-03; the range holds."
        )
        yield UsageChunk(Usage(10, 5))
        yield FinishChunk("stop")

    async def aclose(self) -> None:
        return None


async def run(turns: int, profile_at: int | None) -> dict[int, float]:
    api = FakeBotAPI(max_poll_wait=0.05)
    per_turn: list[float] = []
    profiler = cProfile.Profile()
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "TAPEBOT_HOME": tmp,
            "OPENAI_API_KEY": "sk-bench-0000000000",
            "TELEGRAM_BOT_TOKEN": api.token,
            "TAPEBOT_TELEGRAM__ALLOWED_USERS": f"[{USER}]",
            "TAPEBOT_SCHEDULER__ENABLED": "false",
        }
        model = ChatModel()
        from adapters.ratelimit import FloodLimiter

        options = {
            "request": FakeRequest(api),
            "get_updates_request": FakeRequest(api),
            "poll_timeout": 0.05,
            "rate_limiter": FloodLimiter(overall_per_second=None),
        }
        app = App(
            load_settings(Path(tmp), env),
            model_factory=lambda _m: model,
            adapter_options={"telegram": options},
        )
        await app.start(adapters=True)
        answered: asyncio.Queue[str] = asyncio.Queue()
        original = api.handle

        async def handle(method, p, files=None):
            status, body = await original(method, p, files)
            text = str(p.get("text", ""))
            if method in ("sendMessage", "editMessageText") and text.startswith("answer to message "):
                answered.put_nowait(text)
            return status, body

        api.handle = handle  # type: ignore[method-assign]
        try:
            for i in range(1, turns + 1):
                profiling = profile_at is not None and profile_at <= i < profile_at + 20
                if profiling:
                    profiler.enable()
                t0 = time.process_time()
                api.push_text(USER, f"how is 600519 doing now? (message {i})", user_id=USER)
                while True:
                    text = await asyncio.wait_for(answered.get(), 60)
                    if text.startswith(f"answer to message {i}:"):
                        break
                per_turn.append(time.process_time() - t0)
                if profiling:
                    profiler.disable()
                await asyncio.sleep(0)
        finally:
            await app.stop()
    if profile_at is not None:
        print(f"\ncProfile, messages {profile_at}-{profile_at + 19}:")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
    return {c: statistics.median(per_turn[max(0, c - 5) : c + 4]) for c in CHECKPOINTS if c <= turns}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--profile", type=int, default=None, metavar="TURN")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    header("long session: CPU per message as one chat's history grows")
    figures = asyncio.run(run(args.turns, args.profile))
    base = figures.get(10)
    for turn, cpu in figures.items():
        ratio = f"{cpu / base:5.2f}× message 10" if base else ""
        print(f"message {turn:>5}: {cpu * 1000:8.2f} ms CPU   {ratio}")
    footer()


if __name__ == "__main__":
    main()
