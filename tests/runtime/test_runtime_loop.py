"""The loop over an in-process scripted model: rounds, batching, guards, approvals, cancel."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent import events as ev
from agent.approval import Requester
from agent.ports import Queued
from agent.providers.base import TextChunk
from agent.runtime import TurnRequest
from agent.tools.core import core_tools
from agent.tools.registry import ToolContext, Toolset
from tests.fakes.runtime_kit import Script, call, collect, text

log: list[str] = []
tools = Toolset("test")


@tools.tool(concurrency_safe=True)
async def fast(ctx: ToolContext, tag: str) -> str:
    """A fast read-only tool."""
    log.append(f"start {tag}")
    await asyncio.sleep(0.01)
    log.append(f"end {tag}")
    return f"fast {tag}"


@tools.tool(requires_approval=True)
async def write_note(text: str) -> str:
    """A mutating tool that needs approval."""
    log.append(f"write {text}")
    return "written"


@tools.tool
def slow_serial(n: int) -> dict:
    """Serial tool."""
    log.append(f"serial {n}")
    return {"n": n}


@tools.tool
def big() -> str:
    """Returns a lot of text."""
    return "x" * 20_000


ALL = Toolset.combine("all", tools, core_tools)


def req(text_: str = "hi", **kw) -> TurnRequest:
    return TurnRequest(session_id="s1", text=text_, who=Requester("u1", "tg:1", ("u1",)), **kw)


async def test_multi_round_tool_turn(make_runtime, store):
    script = Script([[text("Let me look. "), call("fast", {"tag": "a"})], [text("Done: fast a")]])
    events = await collect(make_runtime(script, ALL).run(req()))
    kinds = [e.kind for e in events]
    assert kinds[0] == "model_start" and kinds[-1] == "done"
    done = events[-1]
    assert done.text == "Done: fast a" and done.rounds == 2 and done.status == "completed"
    stored = store.messages["s1"]
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2].tool_results[0].content == "fast a"
    assert len(store.usage) == 2 and done.usage.input_tokens == 20


async def test_parallel_and_serial_batches_keep_call_order(make_runtime, store):
    log.clear()
    script = Script(
        [
            [
                call("fast", {"tag": "a"}),
                call("fast", {"tag": "b"}),
                call("slow_serial", {"n": 1}),
                call("fast", {"tag": "c"}),
            ],
            [text("ok")],
        ]
    )
    await collect(make_runtime(script, ALL).run(req()))
    # a and b overlap (parallel); serial runs alone; c runs after it
    assert log[:2] == ["start a", "start b"]
    assert log.index("serial 1") > log.index("end b") and log.index("start c") > log.index("serial 1")
    results = [m.tool_results[0].content for m in store.messages["s1"] if m.role == "tool"]
    assert results == ["fast a", "fast b", '{"n": 1}', "fast c"]


async def test_invalid_arguments_become_tool_errors_and_never_run(make_runtime, store):
    log.clear()
    script = Script(
        [
            [call("slow_serial", None, raw='{"n": 1'), call("slow_serial", {"n": "x"}), call("nope", {})],
            [text("recovered")],
        ]
    )
    events = await collect(make_runtime(script, ALL).run(req()))
    errors = [e for e in events if isinstance(e, ev.ToolErrorEvent)]
    assert [e.code for e in errors] == ["invalid_arguments", "invalid_arguments", "tool_not_found"]
    assert log == []
    assert events[-1].text == "recovered"
    # the model saw the errors
    tool_msgs = [m for m in script.requests[1].messages if m.role == "tool"]
    assert all(json.loads(m.tool_results[0].content)["error"] for m in tool_msgs)


async def test_doom_loop_stops_third_identical_call_and_answers_every_call(make_runtime, store):
    log.clear()
    same = {"n": 7}
    script = Script(
        [
            [call("slow_serial", same)],
            [call("slow_serial", same)],
            [call("slow_serial", same), call("fast", {"tag": "z"})],
            [text("giving up")],
        ]
    )
    events = await collect(make_runtime(script, ALL).run(req()))
    assert log.count("serial 7") == 2
    codes = [e.code for e in events if isinstance(e, ev.ToolErrorEvent)]
    assert codes == ["doom_loop", "aborted"]
    calls = [c.id for m in store.messages["s1"] for c in m.tool_calls]
    answered = [r.call_id for m in store.messages["s1"] for r in m.tool_results]
    assert sorted(calls) == sorted(answered)


async def test_fuzzy_doom_loop_on_long_near_identical_arguments(make_runtime):
    log.clear()
    base = "a long note about the market structure of 600519 and its trading range "
    script = Script(
        [
            [call("slow_serial", {"n": 1}), call("fast", {"tag": base + "1"})],
            [call("fast", {"tag": base + "2"})],
            [call("fast", {"tag": base + "3"})],
            [text("ok")],
        ]
    )
    events = await collect(make_runtime(script, ALL).run(req()))
    assert [e.code for e in events if isinstance(e, ev.ToolErrorEvent)] == ["doom_loop"]


async def test_short_distinct_arguments_are_not_a_doom_loop(make_runtime):
    script = Script([[call("fast", {"tag": f"30000{i}"}) for i in range(5)], [text("ok")]])
    events = await collect(make_runtime(script, ALL).run(req()))
    assert not [e for e in events if isinstance(e, ev.ToolErrorEvent)]


async def test_large_result_spills_to_results_dir(make_runtime, store, tmp_path):
    script = Script([[call("big", {})], [text("ok")]])
    await collect(make_runtime(script, ALL).run(req()))
    content = next(m for m in store.messages["s1"] if m.role == "tool").tool_results[0].content
    assert len(content) < 2_500 and "results/" in content
    spilled = list((tmp_path / "results").iterdir())
    assert len(spilled) == 1 and spilled[0].read_text() == "x" * 20_000


async def test_approval_suspends_and_resumes_after_allow(make_runtime, store):
    log.clear()
    script = Script([[call("write_note", {"text": "hello"})], [text("Saved.")]])
    rt = make_runtime(script, ALL)
    events = await collect(rt.run(req("save a note")))
    approval = next(e for e in events if isinstance(e, ev.ApprovalRequired))
    assert events[-1].status == "suspended" and log == []
    # another user cannot approve

    from agent.errors import ApprovalError

    with pytest.raises(ApprovalError):
        await rt.decide(approval.approval_id, "intruder", "once")
    await rt.decide(approval.approval_id, "u1", "once")
    with pytest.raises(ApprovalError):  # a second tap changes nothing
        await rt.decide(approval.approval_id, "u1", "once")
    events2 = await collect(rt.resume(approval.turn_id))
    assert log == ["write hello"] and events2[-1].text == "Saved."


async def test_denied_approval_is_answered_and_never_runs(make_runtime, store):
    log.clear()
    script = Script([[call("write_note", {"text": "x"})], [text("Understood, not saved.")]])
    rt = make_runtime(script, ALL)
    events = await collect(rt.run(req()))
    approval = next(e for e in events if isinstance(e, ev.ApprovalRequired))
    await rt.decide(approval.approval_id, "u1", "deny")
    events2 = await collect(rt.resume(approval.turn_id))
    assert log == [] and events2[-1].text == "Understood, not saved."
    assert "denied" in script.requests[1].messages[-1].tool_results[0].content


async def test_unattended_turn_denies_approval_tools(make_runtime):
    log.clear()
    script = Script([[call("write_note", {"text": "x"})], [text("I could not save it.")]])
    r = TurnRequest(session_id="s2", text="save", who=Requester(unattended=True))
    events = await collect(make_runtime(script, ALL).run(r))
    assert log == [] and [e.code for e in events if isinstance(e, ev.ToolErrorEvent)] == ["denied"]


async def test_always_allow_covers_only_its_scope(make_runtime, store):
    """A standing approval for a tool without a narrower scope covers the exact same call only:
    the same arguments run without a card, different ones ask again."""
    log.clear()
    script = Script(
        [
            [call("write_note", {"text": "1"})],
            [text("ok")],
            [call("write_note", {"text": "1"})],
            [text("ok")],
            [call("write_note", {"text": "2"})],
            [text("asked")],
        ]
    )
    rt = make_runtime(script, ALL)
    events = await collect(rt.run(req()))
    a = next(e for e in events if isinstance(e, ev.ApprovalRequired))
    await rt.decide(a.approval_id, "u1", "always")
    await collect(rt.resume(a.turn_id))
    events = await collect(rt.run(req("again")))
    assert not [e for e in events if isinstance(e, ev.ApprovalRequired)] and log == ["write 1", "write 1"]
    events = await collect(rt.run(req("other")))
    assert [e for e in events if isinstance(e, ev.ApprovalRequired)] and log == ["write 1", "write 1"]


async def test_new_message_while_suspended_moves_on(make_runtime, store):
    script = Script([[call("write_note", {"text": "x"})], [text("fresh answer")]])
    rt = make_runtime(script, ALL)
    events = await collect(rt.run(req()))
    a = next(e for e in events if isinstance(e, ev.ApprovalRequired))
    events = await collect(rt.run(req("never mind, something else")))
    assert events[-1].text == "fresh answer"
    assert store.approvals[a.approval_id].status == "cancelled"
    calls = [c.id for m in store.messages["s1"] for c in m.tool_calls]
    answered = [r.call_id for m in store.messages["s1"] for r in m.tool_results]
    assert calls == answered


async def test_ask_user_suspends_then_answer_resumes(make_runtime, store):
    script = Script(
        [[call("ask_user", {"question": "Which one?", "options": ["A", "B"]})], [text("You chose B.")]]
    )
    rt = make_runtime(script, ALL)
    events = await collect(rt.run(req()))
    q = next(e for e in events if isinstance(e, ev.Question))
    assert q.options == ("A", "B") and events[-1].status == "suspended"
    await rt.answer(q.turn_id, "B")
    events2 = await collect(rt.resume(q.turn_id))
    assert events2[-1].text == "You chose B."
    assert '"answer": "B"' in script.requests[1].messages[-1].tool_results[0].content


async def test_required_tool_loop_guard_retries_then_warns(make_runtime):
    pf = Toolset("pf")

    @pf.tool(concurrency_safe=True)
    def portfolio(mode: str = "view") -> str:
        """Holdings."""
        return "holdings"

    script = Script([[text("You hold stuff.")], [text("Still text.")], [text("Text again.")]])
    events = await collect(make_runtime(script, pf).run(req("how is my portfolio?")))
    assert [e.reason for e in events if isinstance(e, ev.Retry)] == ["required_tool", "required_tool"]
    assert events[-1].warning and events[-1].text.startswith("⚠")


async def test_required_tool_satisfied_after_one_retry(make_runtime, store):
    pf = Toolset("pf")

    @pf.tool(concurrency_safe=True)
    def portfolio(mode: str = "view") -> str:
        """Holdings."""
        return "600519 x100"

    script = Script(
        [[text("Probably fine.")], [call("portfolio", {"mode": "view"})], [text("You hold 600519.")]]
    )
    events = await collect(make_runtime(script, pf).run(req("what do I hold")))
    assert events[-1].text == "You hold 600519." and not events[-1].warning
    assert not any(m.meta.get("internal_retry") for m in store.messages["s1"])


async def test_cancel_answers_open_calls(make_runtime, store):
    slow = Toolset("slow")

    @slow.tool
    async def wait_long() -> str:
        """Sleeps."""
        await asyncio.sleep(30)
        return "never"

    cancel = asyncio.Event()
    script = Script([[call("wait_long", {})], [text("x")]])
    rt = make_runtime(script, slow)
    out = []

    async def consume():
        async for e in rt.run(req(cancel=cancel)):
            out.append(e)
            if isinstance(e, ev.ToolStart):
                cancel.set()

    await asyncio.wait_for(consume(), 5)
    assert out[-1].status == "cancelled"
    msgs = store.messages["s1"]
    assert msgs[-2].role == "tool" and "ancel" in msgs[-2].tool_results[0].content
    assert msgs[-1].meta == {"abandoned": "cancelled"} and "do not act on it" in msgs[-1].text


@pytest.mark.parametrize("delay", [None, 0.05], ids=["between-chunks", "while-waiting"])
async def test_cancel_interrupts_a_stalled_model_stream(make_runtime, store, delay):
    class Stalled(Script):
        async def stream(self, request):
            yield TextChunk("Thinking about ")
            await asyncio.sleep(30)  # the provider stops sending
            yield TextChunk("never")

    cancel = asyncio.Event()
    rt = make_runtime(Stalled([]), Toolset("none"))
    out: list = []

    async def consume() -> int:
        async for e in rt.run(req(cancel=cancel)):
            out.append(e)
            if isinstance(e, ev.TextDelta):
                if delay is None:  # while the consumer holds the chunk (and awaits, e.g. a send)
                    cancel.set()
                    await asyncio.sleep(0.02)
                else:
                    asyncio.get_running_loop().call_later(delay, cancel.set)
        task = asyncio.current_task()
        assert task is not None
        return task.cancelling()

    pending_cancels = await asyncio.wait_for(consume(), 5)
    assert out[-1].status == "cancelled"
    assert pending_cancels == 0  # the interruption was taken back: the task itself is not cancelled


async def test_inbox_messages_fold_into_next_call(make_runtime, store):
    inbox: asyncio.Queue = asyncio.Queue()
    from agent.messages import Message

    def round1(request):
        inbox.put_nowait(Queued(Message.user("also check 000001")))
        return [call("fast", {"tag": "a"})]

    script = Script([round1, [text("both done")]])
    await collect(make_runtime(script, ALL).run(req(inbox=inbox)))
    second = script.requests[1].messages
    assert second[-1].role == "user" and second[-1].text == "also check 000001"


async def test_recall_is_injected_transiently(make_runtime, store):
    class Hooks:
        async def recall(self, session_id, text):
            return "- never buy at the open"

        async def compact(self, *a):
            return None

        async def after_turn(self, *a):
            return None

        async def session_end(self, *a):
            return None

    script = Script([[text("noted")]])
    await collect(make_runtime(script, ALL, hooks=Hooks()).run(req("buy?")))
    request = script.requests[0]
    # the memories ride in the request's per-call context; the user's message is sent as stored,
    # so it has the same form in every later request (prompt-cache prefix stays stable)
    assert [m.text for m in request.messages] == ["buy?"]
    assert "<relevant-memories>\n- never buy at the open" in request.context
    assert store.messages["s1"][0].text == "buy?"


async def test_rounds_are_bounded(make_runtime):
    script = Script([[call("fast", {"tag": str(i)})] for i in range(20)])
    events = await collect(make_runtime(script, ALL).run(req()))
    assert events[-1].rounds == 15 and "too many tool rounds" in events[-1].text


async def test_crash_mid_execution_is_reported_not_repeated(make_runtime, store):
    """A turn left 'running' with a mutating call marked executing is closed on the next message."""
    log.clear()
    script = Script([[call("write_note", {"text": "x"})]])
    rt = make_runtime(script, ALL)
    events = await collect(rt.run(req()))
    a = next(e for e in events if isinstance(e, ev.ApprovalRequired))
    await rt.decide(a.approval_id, "u1", "once")
    # simulate a crash: the call was marked executing, then the process died
    turn = store.turns[a.turn_id]
    turn.calls[a.call_id] = "executing"
    turn.status = "running"
    script.rounds = [[text("fresh")]]
    events = await collect(rt.run(req("hello again")))
    assert log == []
    result = next(m for m in store.messages["s1"] if m.role == "tool").tool_results[0].content
    assert "may or may not have completed" in result
