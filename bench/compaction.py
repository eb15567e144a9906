"""Compaction of a 2,000-message history: time of the deterministic parts.

    python -m bench.compaction [--messages 2000] [--runs 5]

The history mixes Chinese/English user questions, assistant answers, tool calls and tool results
(a quarter of them large JSON, 3–6K characters). We time, separately and then as the whole
`Compactor.maybe_compact` with an instant summariser and no archive (so only our own code runs):
the token estimate (cold: nothing cached; warm: as on every later round), the tail split, anchor
selection, shrinking tool results, serialisation, reassembly and the hard guard. Target: the
deterministic parts under 100 ms. Every figure is the median of `--runs` runs. Prints figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent import tokens
from agent.compaction import (
    Compactor,
    assemble,
    compaction_threshold,
    enforce_context_limit,
    find_tail_start,
    keep_recent_tokens,
    select_anchor_messages,
    serialize_for_summary,
    shrink_stale_tool_results,
)
from agent.messages import Message, ToolCallPart
from agent.providers.base import ModelInfo, TextChunk
from bench._env import add_runs_arg, footer, header

QUESTIONS = [
    "帮我看看 {code} 的量价结构，是不是在吸筹阶段？我的仓位不超过15%。",
    "Is {code} forming a spring below the trading range? I never buy at the open.",
    "回测一下 {code} 在 src/strategies/wyckoff.py 里的策略，上次报错了",
    "{code} 跌破确认支撑了吗，要不要止损",
]


def history(n: int, seed: int = 3) -> list[Message]:
    rng = random.Random(seed)
    msgs: list[Message] = []
    i = 0
    while len(msgs) < n:
        code = f"{rng.choice([600000, 300000, 2000]) + rng.randint(1, 999):06d}"
        msgs.append(Message.user(rng.choice(QUESTIONS).format(code=code)))
        if rng.random() < 0.5:
            cid = f"c{i}"
            msgs.append(
                Message.assistant(
                    "我来查一下。", [ToolCallPart(id=cid, name="analyze_stock", arguments={"code": code})]
                )
            )
            rows = rng.randint(60, 140) if rng.random() < 0.5 else rng.randint(2, 10)
            body = {
                "code": code,
                "name": "示例股份",
                "phase": rng.choice(["accumulation", "markup", "distribution"]),
                "health": "good",
                "signals": ["spring", "sos"],
                "bars": [[20250101 + k, 10.5 + k / 100, 10.8, 10.2, 10.6, 120000 + k] for k in range(rows)],
            }
            msgs.append(Message.tool_result(cid, "analyze_stock", json.dumps(body, ensure_ascii=False)))
        msgs.append(
            Message.assistant(
                f"结论：{code} 处于{rng.choice(['吸筹', '拉升', '派发'])}阶段，等待回踩确认，跌破支撑不买。"
            )
        )
        i += 1
    return msgs[:n]


class Instant:
    info = ModelInfo(id="bench", model="bench", provider="bench", context_window=200_000)

    async def stream(self, request):
        yield TextChunk("摘要：用户在多只股票之间比较吸筹与派发阶段，已完成多次分析，待确认入场位。" * 2)

    async def aclose(self) -> None:
        return None


def timed(fn, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=2000)
    add_runs_arg(parser)
    args = parser.parse_args()
    header("compaction")
    msgs = history(args.messages)
    chars = sum(len(m.text) + sum(len(r.content) for r in m.tool_results) for m in msgs)
    window = 200_000
    keep = keep_recent_tokens(window)

    def cold_estimate() -> None:
        tokens.estimate_tokens.cache_clear()
        tokens.estimate_messages(msgs)

    cold = timed(cold_estimate, args.runs)
    total = tokens.estimate_messages(msgs)
    warm = timed(lambda: tokens.estimate_messages(msgs), args.runs)
    start = find_tail_start(msgs, keep)
    head, tail = msgs[:start], msgs[start:]
    anchors = select_anchor_messages(head)
    steps = {
        "estimate (cold cache)": cold,
        "estimate (warm cache)": warm,
        "tail split": timed(lambda: find_tail_start(msgs, keep), args.runs),
        "anchors": timed(lambda: select_anchor_messages(head), args.runs),
        "shrink tool results": timed(lambda: shrink_stale_tool_results(head), args.runs),
        "serialise head": timed(
            lambda: serialize_for_summary(shrink_stale_tool_results(head), 200_000), args.runs
        ),
        "reassemble": timed(
            lambda: assemble("摘要", anchors, "archive://s/x", ["600519"], tail),
            args.runs,
        ),
        "hard guard": timed(lambda: enforce_context_limit(msgs, compaction_threshold(window)), args.runs),
    }

    async def whole(cold: bool) -> float:
        compactor = Compactor(summarizer=Instant())
        samples = []
        for _ in range(args.runs):
            if cold:
                tokens.estimate_tokens.cache_clear()
            else:  # as in the runtime: every earlier round already estimated these messages
                tokens.estimate_messages(msgs)
            t = time.perf_counter()
            await compactor.maybe_compact("bench", msgs, model_info=Instant.info, overhead_tokens=4000)
            samples.append((time.perf_counter() - t) * 1000)
        return statistics.median(samples)

    steps["maybe_compact, whole pipeline, warm estimate cache"] = asyncio.run(whole(cold=False))
    steps["maybe_compact, whole pipeline, cold (nothing estimated before)"] = asyncio.run(whole(cold=True))
    print(
        f"compaction of {len(msgs):,} messages ({chars:,} characters, ~{total:,} estimated tokens; window 200K)"
    )
    print(f"head {len(head):,} messages, tail {len(tail):,} messages")
    for name, ms in steps.items():
        print(f"  {name:<58}{ms:>8.1f} ms")
    footer()


if __name__ == "__main__":
    main()
