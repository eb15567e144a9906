"""End to end through the real runtime: a 300-turn scripted conversation with large tool results
stays under the model's window, compacting many times, and at turn 290 the model restores a fact
from turn 3 out of the context archive with `query_history`."""

from __future__ import annotations

import json
import re

from memory_helpers import resolve_codes

from agent import events as ev
from agent.compaction import compaction_threshold
from agent.context_hooks import TaskTracker
from agent.inmemory import InMemoryStore
from agent.messages import Message, ToolCallPart
from agent.providers.base import ModelInfo, ModelRequest, TextChunk, ToolCallChunk
from agent.providers.scripted import ScriptedClient, reply
from agent.runtime import AgentRuntime, TurnRequest
from agent.tokens import estimate_messages
from agent.tools.registry import Deps, Toolset
from memory.hooks import build_memory_hooks
from memory.longterm import MemoryStore
from memory.recall import MemoryRecall
from memory.tools import MemoryServices, memory_tools

WINDOW = 32_768
TURNS = 300
FACT_TURN, ASK_TURN = 3, 290
FACT = "我在 2025-01-03 以 1523.6 元买入了 100 股贵州茅台"

fake_market = Toolset("fake_market")


@fake_market.tool(concurrency_safe=True)
async def analyze_stock(code: str, turn: int) -> dict:
    """Analyse a stock (a large, turn-specific result)."""
    return {
        "code": code,
        "turn": turn,
        "phase": "accumulation",
        "bars": [[20250101 + i, 1700 + turn, 1710, 1690, 1705, 30000 + i] for i in range(90)],
    }


def user_text(t: int) -> str:
    if t == FACT_TURN:
        return f"第{t}轮：顺便记一下，{FACT}。再看看 600519"
    if t == ASK_TURN:
        return "我第3轮说的买入价是多少？请去归档里找原文"
    return f"第{t}轮：600519 现在怎么样"


def model_script(request: ModelRequest):
    """The main model: analyse each question; at the ask turn, search and restore the archive."""
    last = request.messages[-1]
    if last.role == "user":
        raw = re.search(r"<current-user-message>\n(.*)\n</current-user-message>", last.text, re.S)
        text = raw.group(1) if raw else last.text
        if text.startswith("我第3轮"):
            assert "1523.6" not in json.dumps([m.text for m in request.messages], ensure_ascii=False)
            return [
                ToolCallChunk(
                    ToolCallPart(
                        id="q1", name="query_history", arguments={"source": "archive", "query": "第3轮"}
                    )
                )
            ]
        turn = int(re.match(r"第(\d+)轮", text).group(1))
        return [
            ToolCallChunk(
                ToolCallPart(id=f"a{turn}", name="analyze_stock", arguments={"code": "600519", "turn": turn})
            )
        ]
    result = last.tool_results[0]
    if result.name == "query_history" and result.call_id == "q1":
        ref = json.loads(result.content)["archives"][0]["archive_ref"]
        args = {"source": "archive", "archive_ref": ref, "query": "第3轮"}
        return [ToolCallChunk(ToolCallPart(id="q2", name="query_history", arguments=args))]
    if result.name == "query_history":
        found = re.search(r"以 ([\d.]+) 元买入", result.content)
        return [TextChunk(f"归档原文显示：你的买入价是 {found.group(1) if found else '未找到'} 元。")]
    return [TextChunk("处于吸筹阶段，等待回踩确认。")]


def summary_script(request: ModelRequest):
    head = request.messages[0].text
    turns = sorted({int(t) for t in re.findall(r"第(\d+)轮", head)})
    span = f"第{turns[0]}–{turns[-1]}轮" if turns else "若干轮"
    return reply(f"摘要：{span}用户持续询问 600519，助手多次分析，结论为吸筹阶段、等待回踩确认。")


async def test_300_turns_stay_under_the_window_and_turn_3_is_restored(db, tmp_path):
    info = ModelInfo(id="main", model="scripted", provider="scripted", context_window=WINDOW)
    main = ScriptedClient(default=lambda req: [*model_script(req), *reply("")[-2:]], info=info)
    summarizer = ScriptedClient(default=summary_script, info=info)
    store = InMemoryStore()
    tracker = TaskTracker()
    hooks = build_memory_hooks(
        db,
        archive_dir=tmp_path / "archive",
        tracker=tracker,
        summarizer=summarizer,
        code_resolver=resolve_codes,
        session_store=store,
        overhead_tokens=1500,
    )
    mem_store = MemoryStore(db, code_resolver=resolve_codes)
    services = MemoryServices(
        store=mem_store,
        recall=MemoryRecall(mem_store),
        archive=hooks.compactor.archive,
        scope_of=hooks.scope_of,
    )
    tools = Toolset.combine("all", fake_market, memory_tools)
    runtime = AgentRuntime(
        model_for=lambda _m: main, tools=tools, store=store, hooks=hooks, deps=Deps(services)
    )
    compactions: list[ev.Compaction] = []
    final = ""
    for t in range(1, TURNS + 1):
        async for event in runtime.run(TurnRequest(session_id="s1", text=user_text(t))):
            if isinstance(event, ev.Compaction):
                compactions.append(event)
            if isinstance(event, ev.ErrorEvent):
                raise AssertionError(event.message)
            if isinstance(event, ev.Done) and t == ASK_TURN:
                final = event.text
    await tracker.aclose()

    assert "1523.6" in final
    assert len(compactions) >= 10 and all(c.archive_ref for c in compactions)
    assert all(c.dropped == 0 for c in compactions)  # the summary always sufficed
    limit = compaction_threshold(WINDOW)
    for request in main.requests:
        assert estimate_messages(request.messages, request.system, request.tools) <= WINDOW
        # Stored history (without the transient recall block) stays under the compaction threshold
        # plus one round's growth.
        assert estimate_messages(request.messages) <= limit + 4000
    stored = await store.load_messages("s1")
    assert stored[0].meta.get("compaction") == "summary"
    assert all(not m.text.startswith("<relevant-memories>") for m in stored if m.role == "user")
    assert any(isinstance(m, Message) for m in stored)
