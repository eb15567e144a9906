"""Transient recall injection, background upkeep that never blocks, TaskState, and the hooks the
runtime calls."""

from __future__ import annotations

import asyncio
import json

from memory_helpers import answering, resolve_codes

from agent.compaction import Compactor
from agent.context_hooks import (
    CompactingHooks,
    NoContextHooks,
    TaskTracker,
    context_text,
    unwrap_recall,
    wrap_recall,
)
from agent.messages import Message, ToolCallPart
from agent.providers.base import ModelInfo
from agent.providers.scripted import ScriptedClient, reply
from memory.archive import FileArchiveStore
from memory.hooks import MemoryContextHooks, build_memory_hooks
from memory.longterm import MemoryStore
from memory.recall import MemoryRecall
from memory.taskstate import (
    TaskState,
    TaskStateStore,
    TaskStateUpdater,
    normalise_task_state,
    render_task_state,
)


def test_context_text_is_empty_without_blocks_and_marked_as_reference_otherwise():
    assert context_text([]) == "" and context_text(["", ""]) == ""
    text = context_text(["<relevant-memories>\n- [preference] 不追涨\n</relevant-memories>", ""])
    assert text.startswith("<relevant-memories>") and "not a new user message" in text


def test_unwrap_recall_returns_the_users_words():
    assert unwrap_recall(wrap_recall("体检一下", "mem")) == "体检一下"
    assert unwrap_recall("plain") == "plain"


async def test_task_tracker_owns_and_drains_tasks():
    tracker = TaskTracker()
    done = []

    async def work(i):
        await asyncio.sleep(0.01)
        done.append(i)

    async def boom():
        raise RuntimeError("logged, not raised")

    for i in range(3):
        tracker.spawn(work(i))
    tracker.spawn(boom())
    assert await tracker.drain(timeout=5)
    assert sorted(done) == [0, 1, 2] and len(tracker) == 0
    tracker.spawn(asyncio.sleep(3600))
    await tracker.aclose()
    assert len(tracker) == 0


async def test_no_hooks_do_nothing():
    hooks = NoContextHooks()
    client = ScriptedClient()
    assert await hooks.recall("s", "x") is None
    assert await hooks.compact("s", [], client, 0, False) is None


def test_taskstate_normalisation_drops_steps_prices_and_duplicates():
    state = TaskState(
        goal="决定是否加仓宁德时代",
        open_loops=[
            "Call analyze_stock for 300750",
            "确认宁德时代的支撑位",
            "确认宁德时代的支撑位",
            "等待用户回复",
        ],
        important_facts=[
            "用户单票仓位不超过15%",
            "当前价格 215.3 元",
            "账户余额 12 万",
            "USER单票仓位不超过15%",
        ],
        last_decision={"action": "暂不加仓", "reason": "未确认支撑"},
    )
    clean = normalise_task_state(state)
    assert clean.open_loops == ["确认宁德时代的支撑位"]
    assert clean.important_facts == ["用户单票仓位不超过15%", "USER单票仓位不超过15%"]
    text = render_task_state(clean)
    assert "目标: 决定是否加仓宁德时代" in text and "最近决定: 暂不加仓（未确认支撑）" in text


async def test_taskstate_updater_saves_filtered_state_and_survives_bad_output(db, clock):
    store = TaskStateStore(db, clock=clock)
    answer = json.dumps(
        {
            "goal": "比较比亚迪和宁德时代",
            "open_loops": ["run backtest on 002594", "用户还没决定买哪只"],
            "important_facts": ["比亚迪现价 250 元", "用户只做 A 股"],
            "last_decision": None,
        },
        ensure_ascii=False,
    )
    updater = TaskStateUpdater(store, answering("```json\n" + answer + "\n```", "not json at all"))
    msgs = [Message.user("比亚迪和宁德时代哪个好"), Message.assistant("我来比较")]
    state = await updater.update("s1", msgs)
    assert state is not None and state.open_loops == ["用户还没决定买哪只"]
    assert state.important_facts == ["用户只做 A 股"] and state.seen_messages == 2
    assert await updater.update("s1", msgs) is None  # invalid output: old state kept
    assert (await store.get("s1")).goal == "比较比亚迪和宁德时代"


async def test_taskstate_store_saves_and_updates_the_row(db, clock):
    """save() is plain SQL on SQLite and Core elsewhere; either way the row is what SQLAlchemy reads."""
    import sqlalchemy as sa

    from memory.taskstate import TASK_STATES, TaskState

    store = TaskStateStore(db, clock=clock)
    assert await store.get("s1") is None
    await store.save("s1", TaskState(goal="看比亚迪", open_loops=["等回踩"]))
    clock.advance(minutes=1)
    await store.save("s1", TaskState(goal="看宁德时代"))
    async with db.read() as s:
        row = (await s.execute(sa.select(TASK_STATES).where(TASK_STATES.c.session_id == "s1"))).first()
    assert row is not None and row.data["goal"] == "看宁德时代" and row.data["open_loops"] == []
    assert row.updated_at == clock.now()
    assert (await store.get("s1")).goal == "看宁德时代"


async def test_memory_hooks_recall_and_background_upkeep(db, clock, store: MemoryStore, tmp_path):
    await store.add("u1", "preference", "用户不追涨")
    await store.add("u1", "decision", "比亚迪回踩 20 日线再考虑建仓")
    gate = asyncio.Event()

    class SlowClient(ScriptedClient):
        async def stream(self, request):
            await gate.wait()  # the model is slow: after_turn must not wait for it
            async for chunk in super().stream(request):
                yield chunk

    slow = SlowClient(default=reply('{"goal": "看比亚迪", "open_loops": [], "important_facts": []}'))
    tracker = TaskTracker()

    async def scope_of(session_id):
        return "u1"

    tasks = TaskStateStore(db, clock=clock)
    hooks = MemoryContextHooks(
        recall=MemoryRecall(store, taskstates=tasks, code_resolver=resolve_codes),
        tracker=tracker,
        taskstate=TaskStateUpdater(tasks, slow),
        scope_of=scope_of,
        taskstate_every=2,
        taskstate_min_chars=0,  # this test is about running in the background, not the cadence
    )
    text = await hooks.recall("s1", "比亚迪能建仓吗")
    assert text and "用户不追涨" in text and "比亚迪回踩" in text
    msgs = [Message.user("比亚迪能建仓吗"), Message.assistant("可以等回踩")]
    await asyncio.wait_for(hooks.after_turn("s1", msgs), 1)  # returns at once
    assert len(tracker) == 1
    gate.set()
    assert await tracker.drain(timeout=5)
    assert "# 当前任务" in (await hooks.recall("s1", "继续"))


async def test_taskstate_is_refreshed_only_when_the_dialogue_changed_something(db, clock, store: MemoryStore):
    """Small talk never costs a summary call, however long; a state-changing tool call (a trade)
    refreshes at once; a substantial read-only exchange refreshes every eight messages."""
    tracker = TaskTracker()
    client = ScriptedClient(default=reply('{"goal": "看比亚迪", "open_loops": [], "important_facts": []}'))
    hooks = MemoryContextHooks(
        recall=MemoryRecall(store, code_resolver=resolve_codes),
        tracker=tracker,
        taskstate=TaskStateUpdater(TaskStateStore(db, clock=clock), client),
        changing_tools=frozenset({"execute_trade"}),
    )
    chat: list[Message] = []
    for _ in range(12):  # twenty-four messages of small talk
        chat += [Message.user("好的"), Message.assistant("不客气")]
        await hooks.after_turn("small", list(chat))
    assert await tracker.drain(timeout=5)
    assert len(client.requests) == 0

    analysis = "比亚迪处于吸筹阶段 C，20 日线附近有支撑；" * 10
    talk = [Message.user("分析一下比亚迪"), Message.assistant(analysis)] * 2
    await hooks.after_turn("real", talk)  # four messages: not yet
    await hooks.after_turn("real", talk * 2)
    assert await tracker.drain(timeout=5)
    assert len(client.requests) == 1

    trade = ToolCallPart(id="t1", name="execute_trade", arguments={"code": "002594", "side": "buy"})
    bought = [
        Message.user("买 100 股"),
        Message.assistant("", [trade]),
        Message.tool_result("t1", "execute_trade", "{}"),
    ]
    await hooks.after_turn("real", [*talk, *talk, *bought])  # three messages, but an order was placed
    assert await tracker.drain(timeout=5)
    assert len(client.requests) == 2


async def test_taskstate_side_calls_are_halved_on_a_tool_heavy_session(db, clock, store: MemoryStore):
    """A session of read-only tool turns (user, call, result, answer): the old cadence (every four
    messages with content) made a summary call after every turn; now at most every other one."""
    tracker = TaskTracker()
    client = ScriptedClient(default=reply('{"goal": "看比亚迪", "open_loops": [], "important_facts": []}'))
    hooks = MemoryContextHooks(
        recall=MemoryRecall(store, code_resolver=resolve_codes),
        tracker=tracker,
        taskstate=TaskStateUpdater(TaskStateStore(db, clock=clock), client),
        changing_tools=frozenset({"execute_trade"}),
    )
    chat: list[Message] = []
    turns = 20
    for i in range(turns):
        call = ToolCallPart(id=f"c{i}", name="analyze_stock", arguments={"code": "002594"})
        chat += [
            Message.user(f"分析一下比亚迪 {i}"),
            Message.assistant("", [call]),
            Message.tool_result(f"c{i}", "analyze_stock", "数据" * 200),
            Message.assistant("结论：等回踩"),
        ]
        await hooks.after_turn("s", list(chat))
        assert await tracker.drain(timeout=5)
    assert len(client.requests) <= turns // 2


async def test_compacting_hooks_persist_and_return_the_new_history(tmp_path):
    class Store:
        def __init__(self):
            self.replaced = None

        async def replace_messages(self, session_id, messages):
            self.replaced = (session_id, messages)

    msgs = []
    for t in range(40):
        cid = f"c{t}"
        msgs += [
            Message.user(f"问题{t} 600519"),
            Message.assistant("", [ToolCallPart(id=cid, name="analyze_stock", arguments={"code": "600519"})]),
            Message.tool_result(cid, "analyze_stock", "数据" * 800),
            Message.assistant("结论"),
        ]
    store = Store()
    client = ScriptedClient(
        [reply("摘要：用户反复分析 600519，结论为吸筹阶段，等待回踩确认后再考虑。")],
        info=ModelInfo(id="m", model="m", provider="scripted", context_window=65_536),
    )
    hooks = CompactingHooks(Compactor(archive=FileArchiveStore(tmp_path)), store=store, overhead_tokens=500)
    out = await hooks.compact("s1", msgs, client, 0, False)
    assert out is not None
    new_messages, event = out
    assert store.replaced == ("s1", new_messages) and event.kind == "compaction"
    assert event.after_messages == len(new_messages) < len(msgs) and event.archive_ref


async def test_build_memory_hooks_wires_everything(db, tmp_path):
    tracker = TaskTracker()
    hooks = build_memory_hooks(
        db,
        archive_dir=tmp_path / "archive",
        tracker=tracker,
        memory_client=ScriptedClient(),
        code_resolver=resolve_codes,
    )
    assert (
        hooks.compactor is not None
        and hooks.compactor.flush is not None
        and hooks.compactor.archive is not None
    )
    assert await hooks.recall("no-such-session", "随便问问") is None
    await hooks.session_end("s", [Message.user("hi")])
    await tracker.aclose()


async def test_recall_reads_memories_and_taskstate(tmp_path, clock):
    """Whether the user has memories and the session's TaskState are asked on every message: with no
    memories in scope, the TaskState alone is recalled."""
    from memory.db import Database
    from memory.longterm import create_memory_schema

    async with Database(f"sqlite+aiosqlite:///{tmp_path / 'm.db'}", migrate=False) as db:
        await create_memory_schema(db)
        tasks = TaskStateStore(db, clock=clock)
        recall = MemoryRecall(MemoryStore(db, clock=clock), taskstates=tasks, code_resolver=resolve_codes)
        assert (await recall.recall("u1", "hi", session_id="s1")).text == ""
        await tasks.save("s1", TaskState(goal="看比亚迪", open_loops=["等回踩"]))
        text = (await recall.recall("u1", "比亚迪呢", session_id="s1")).text
    assert "# 当前任务" in text and "看比亚迪" in text
