"""Compaction (seed test_compaction + test_compaction_guards re-expressed)."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from agent.compaction import (
    ACK_TEXT,
    Compactor,
    compaction_threshold,
    enforce_context_limit,
    expand_tail_for_tool_refs,
    find_tail_start,
    hard_limit,
    keep_recent_tokens,
    reserve_tokens,
    score_message_importance,
    select_anchor_messages,
    serialize_for_summary,
    shrink_stale_tool_results,
    summarize_tool_result,
)
from agent.messages import Message, ToolCallPart
from agent.providers.base import ModelInfo, TextChunk
from agent.providers.scripted import ScriptedClient, reply
from agent.tokens import estimate_messages
from memory.archive import FileArchiveStore

SUMMARY = "用户在分析平安银行(000001)和贵州茅台(600519)，已完成量价分析与一次回测，待确认入场位。"


def info(window: int) -> ModelInfo:
    return ModelInfo(id="m", model="m", provider="scripted", context_window=window)


def call(name: str, args: dict, cid: str) -> ToolCallPart:
    return ToolCallPart(id=cid, name=name, arguments=args)


def big_json(code: str, rows: int = 120) -> str:
    return json.dumps(
        {
            "code": code,
            "name": "贵州茅台",
            "phase": "accumulation",
            "health": "good",
            "signals": ["spring", "sos"],
            "debug": "x" * 500,
            "bars": [[20250101 + i, 1700 + i, 1710 + i, 1690 + i, 1705 + i, 30000 + i] for i in range(rows)],
        },
        ensure_ascii=False,
    )


def conversation(turns: int, tool_chars: int = 4000) -> list[Message]:
    msgs: list[Message] = []
    for t in range(turns):
        cid = f"c{t}"
        msgs.append(Message.user(f"第{t}轮：帮我看看 600519 的走势，用户约束：单票仓位不超过15%"))
        msgs.append(Message.assistant("我来分析。", [call("analyze_stock", {"code": "600519"}, cid)]))
        msgs.append(Message.tool_result(cid, "analyze_stock", big_json("600519", rows=tool_chars // 40)))
        msgs.append(Message.assistant(f"第{t}轮结论：处于吸筹阶段，等待回踩确认。"))
    return msgs


# ---- numbers --------------------------------------------------------------------------------------
def test_reserve_threshold_and_keep_numbers():
    assert reserve_tokens(16_000) == 8000
    assert reserve_tokens(65_536) == 16_384
    assert reserve_tokens(64_000) == 16_384
    assert reserve_tokens(128_000) == 32_000
    assert reserve_tokens(200_000) == 32_768
    assert reserve_tokens(1_000_000) == 32_768
    assert compaction_threshold(200_000) == 200_000 - 32_768
    assert compaction_threshold(100_000) == 75_000
    assert keep_recent_tokens(16_000) == 4000
    assert keep_recent_tokens(65_536) == 20_000
    assert keep_recent_tokens(200_000) == 20_000


# ---- split ----------------------------------------------------------------------------------------
def test_tail_keeps_more_than_four_when_budget_allows_and_never_starts_on_tool():
    msgs = conversation(10, tool_chars=400)
    start = find_tail_start(msgs, keep_tokens=2000)
    assert len(msgs) - start > 4
    assert msgs[start].role != "tool"
    start_small = find_tail_start(msgs, keep_tokens=1)
    assert len(msgs) - start_small >= 4 and msgs[start_small].role != "tool"


def test_expand_tail_for_tool_refs_three_cases():
    a = Message.assistant("", [call("t", {}, "x1"), call("t", {}, "x2")])
    r1 = Message.tool_result("x1", "t", "1")
    r2 = Message.tool_result("x2", "t", "2")
    u = Message.user("hi")
    msgs = [u, a, r1, r2, Message.assistant("done")]
    assert expand_tail_for_tool_refs(msgs, 3) == 1  # result's call pulled in
    assert expand_tail_for_tool_refs(msgs, 4) == 4  # no tool result in the tail
    orphan = [u, Message.tool_result("zz", "t", "?"), Message.assistant("x")]
    assert expand_tail_for_tool_refs(orphan, 1) == 1  # unknown call: nothing to pull


def test_tool_result_never_separated_from_its_call_in_find_tail_start():
    msgs = conversation(6, tool_chars=4000)
    for keep in (1, 500, 1500, 3000, 6000):
        start = find_tail_start(msgs, keep)
        tail = msgs[start:]
        declared = {c.id for m in tail for c in m.tool_calls}
        needed = {r.call_id for m in tail for r in m.tool_results}
        assert needed <= declared


# ---- anchors / shrinking / serialisation ----------------------------------------------------------
def test_anchor_scoring_prefers_users_codes_paths_errors():
    plain = Message.assistant("好的")
    user_code = Message.user("帮我看看 603373 和 src/app/main.py，回测失败了")
    assert score_message_importance(user_code, 0, 10) > score_message_importance(plain, 9, 10)
    head = [Message.assistant(f"闲聊 {i}") for i in range(20)]
    head[3] = user_code
    anchors = select_anchor_messages(head, max_items=3)
    assert anchors[0].index == 3 and "603373" in anchors[0].text
    assert [a.index for a in anchors] == sorted(a.index for a in anchors)
    assert all(len(a.text) <= 220 for a in anchors)


def test_summarize_tool_result_keeps_key_fields_last_rows_and_length():
    content = big_json("600519")
    s = summarize_tool_result("analyze_stock", content)
    assert 400 <= len(s) <= 600
    assert "600519" in s and "phase=accumulation" in s and "health=good" in s
    assert "20250220" in s  # one of the last five bars (20250101 + 119)
    err = summarize_tool_result(
        "run_backtest", json.dumps({"error": "No data found", "status": "failed", "x": "y" * 2000})
    )
    assert "No data found" in err and 400 <= len(err) <= 600
    text = summarize_tool_result("web_fetch", "line\n" * 500)
    assert len(text) <= 600 and text.endswith("…")


def test_shrink_only_on_a_copy():
    msgs = conversation(2)
    original = [m.model_copy() for m in msgs]
    shrunk = shrink_stale_tool_results(msgs)
    assert shrunk[2].tool_results[0].content != msgs[2].tool_results[0].content
    assert len(shrunk[2].tool_results[0].content) <= 600
    assert msgs == original  # the input list and messages are untouched
    assert shrunk[2].tool_results[0].call_id == msgs[2].tool_results[0].call_id


def test_serialisation_tags():
    msgs = conversation(1)
    text = serialize_for_summary(shrink_stale_tool_results(msgs))
    assert "[user] 第0轮" in text
    assert "[assistant:tool_call] analyze_stock(" in text
    assert "[tool:analyze_stock]" in text


# ---- the compactor --------------------------------------------------------------------------------
async def test_no_compaction_when_short():
    msgs = conversation(2)
    assert (
        await Compactor(summarizer=ScriptedClient()).maybe_compact(
            "s", msgs, model_info=info(200_000), overhead_tokens=0
        )
        is None
    )


async def test_compaction_on_large_context(tmp_path):
    archive = FileArchiveStore(tmp_path / "archive")
    summarizer = ScriptedClient([reply(SUMMARY)])
    msgs = conversation(60)
    window = 65_536
    assert estimate_messages(msgs) > compaction_threshold(window)
    result = await Compactor(archive=archive, summarizer=summarizer).maybe_compact(
        "sess-1", msgs, model_info=info(window), overhead_tokens=1000
    )
    assert result is not None and result.summarized
    out = result.messages
    assert out[0].text.startswith("[对话摘要]") and SUMMARY in out[0].text
    assert "[动态保留片段]" in out[0].text and "[可恢复归档]" in out[0].text
    assert out[0].meta["compaction"] == "summary" and result.archive_ref in out[0].text
    # An acknowledgement keeps roles alternating only when the tail starts with a user message.
    tail = out[2:] if out[1].text == ACK_TEXT else out[1:]
    assert tail[0].role != "tool" and (tail[0].role == "assistant") == (out[1].text != ACK_TEXT)
    assert out[-1] == msgs[-1]  # the tail is untouched
    assert tail == msgs[len(msgs) - len(tail) :]
    assert estimate_messages(out) + 1000 <= compaction_threshold(window)
    declared = {c.id for m in out for c in m.tool_calls}
    assert {r.call_id for m in out for r in m.tool_results} <= declared
    # The summariser saw shrunk tool results, never the raw 4K JSON.
    prompt = summarizer.requests[0].messages[0].text
    assert "x" * 500 not in prompt and "[tool:analyze_stock" in prompt
    # The archive holds the original head and is searchable by code and restorable.
    restored = await archive.restore(result.archive_ref)
    assert restored == msgs[: len(msgs) - len(tail)]
    hits = await archive.search("600519 怎么样", session_id="sess-1")
    assert hits and hits[0].meta.archive_ref == result.archive_ref
    lines = await archive.recall_lines("sess-1", "再看看 600519")
    assert result.archive_ref in lines[0]
    assert result.event().archive_ref == result.archive_ref


def just_over_threshold(window: int) -> list[Message]:
    turns = 1
    while estimate_messages(conversation(turns)) <= compaction_threshold(window):
        turns += 1
    msgs = conversation(turns)
    assert estimate_messages(msgs) <= hard_limit(window)
    return msgs


async def test_failed_summary_returns_nothing_and_never_rewrites_tool_results(caplog):
    msgs = just_over_threshold(65_536)
    before = [m.model_copy() for m in msgs]
    for failing in ([RuntimeError("boom")], [reply("短")], [reply("")]):
        client = ScriptedClient([failing[0]])
        with caplog.at_level(logging.WARNING, logger="agent.compaction"):
            result = await Compactor(summarizer=client).maybe_compact(
                "s", msgs, model_info=info(65_536), overhead_tokens=0
            )
        # Over the threshold but inside the hard limit: unchanged, logged, retried next round.
        assert result is None
        assert msgs == before
    assert "compaction skipped" in caplog.text and "too short" in caplog.text and "failed" in caplog.text


async def test_hanging_summary_stream_times_out():
    async def hang(request):
        await asyncio.sleep(3600)
        yield TextChunk("never")

    class Hanging(ScriptedClient):
        def stream(self, request):
            return hang(request)

    msgs = just_over_threshold(65_536)
    compactor = Compactor(summarizer=Hanging(), summary_idle_timeout=0.05)
    assert await compactor.maybe_compact("s", msgs, model_info=info(65_536), overhead_tokens=0) is None


async def test_forced_compaction_on_a_short_history(tmp_path):
    msgs = conversation(3, tool_chars=400)
    result = await Compactor(
        archive=FileArchiveStore(tmp_path), summarizer=ScriptedClient([reply(SUMMARY)])
    ).maybe_compact("s", msgs, model_info=info(200_000), overhead_tokens=0, force=True)
    assert result is not None and len(result.messages) < len(msgs)


async def test_memory_flush_runs_before_summary_and_failure_is_tolerated():
    calls = []

    class Flush:
        async def flush(self, session_id, head):
            calls.append(len(head))
            raise RuntimeError("db down")

    msgs = conversation(60)
    result = await Compactor(flush=Flush(), summarizer=ScriptedClient([reply(SUMMARY)])).maybe_compact(
        "s", msgs, model_info=info(65_536), overhead_tokens=0
    )
    assert calls and result is not None and result.summarized


# ---- guards ---------------------------------------------------------------------------------------
def test_enforce_context_limit_cases():
    msgs = conversation(20)
    same, dropped = enforce_context_limit(msgs, 10**9)
    assert dropped == 0 and same == msgs
    limit = estimate_messages(msgs) // 3
    kept, dropped = enforce_context_limit(msgs, limit)
    assert dropped > 0 and kept[-1] == msgs[-1]
    assert estimate_messages(kept) <= limit
    assert kept[0].role != "tool"
    declared = {c.id for m in kept for c in m.tool_calls}
    assert {r.call_id for m in kept for r in m.tool_results} <= declared
    tiny, _ = enforce_context_limit(msgs, 1)
    assert len(tiny) >= 1 and tiny[0].role != "tool"


async def test_regression_huge_history_is_brought_under_the_window(tmp_path):
    """A `len/2` estimate said 228K for a 275K-token history and the gateway rejected it. With a
    failing summariser, the hard guard still brings it under the window (and archives the drop)."""
    msgs = conversation(240, tool_chars=4000)
    window = 200_000
    assert estimate_messages(msgs) > window
    archive = FileArchiveStore(tmp_path)
    result = await Compactor(
        archive=archive, summarizer=ScriptedClient([RuntimeError("down")])
    ).maybe_compact("s", msgs, model_info=info(window), overhead_tokens=5000)
    assert result is not None and result.dropped > 0 and not result.summarized
    assert estimate_messages(result.messages) + 5000 <= compaction_threshold(window)
    assert "dropped" in result.note
    assert result.archive_ref and len(await archive.restore(result.archive_ref)) == result.dropped


@pytest.mark.parametrize("window", [16_000, 65_536])
async def test_small_windows_still_fit(window):
    msgs = conversation(30, tool_chars=2000)
    result = await Compactor(summarizer=ScriptedClient(default=reply(SUMMARY))).maybe_compact(
        "s", msgs, model_info=info(window), overhead_tokens=2000
    )
    assert result is not None
    assert (
        estimate_messages(result.messages) + 2000
        <= compaction_threshold(window) + reserve_tokens(window) // 2
    )
