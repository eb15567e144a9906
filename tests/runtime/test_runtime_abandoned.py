"""A request that got no answer — cancelled, failed, or left running by a crash — is closed in the
history with a note telling the model not to act on it, and the note says truthfully whether any
tool had already run."""

from __future__ import annotations

import asyncio

from agent import events as ev
from agent.approval import Requester
from agent.inmemory import InMemoryStore
from agent.messages import Message
from agent.ports import TurnRecord
from agent.runtime import AgentRuntime, TurnRequest
from agent.tools.registry import Toolset
from tests.fakes.runtime_kit import Script, call, collect, text

WHO = Requester("u1", "c1")


def _req(text_: str, **kw) -> TurnRequest:
    return TurnRequest(session_id="s1", text=text_, who=WHO, **kw)


async def test_a_turn_left_running_by_a_crash_is_closed_as_interrupted():
    store = InMemoryStore()
    turn = TurnRecord(id="t_1", session_id="s1", status="running", rounds=1, requester="u1")
    await store.commit("s1", messages=[Message.user("buy 1000 600519")], turn=turn)
    script = Script([[text("Hello.")]])
    rt = AgentRuntime(model_for=lambda _m: script, tools=Toolset("none"), store=store)
    await collect(rt.run(_req("hello")))
    seen = [(m.role, m.text) for m in script.requests[0].messages]
    assert seen[0] == ("user", "buy 1000 600519")
    assert seen[1][0] == "assistant" and "interrupted" in seen[1][1] and "do not act on it" in seen[1][1]
    assert "Nothing was carried out" in seen[1][1]
    assert seen[2] == ("user", "hello")


async def test_a_cancel_after_a_tool_ran_says_only_its_results_were_carried_out(store, make_runtime):
    tools = Toolset("t")

    @tools.tool
    async def quote() -> str:
        """A quote."""
        return "1480.55"

    @tools.tool
    async def wait_long() -> str:
        """Sleeps."""
        await asyncio.sleep(30)
        return "never"

    cancel = asyncio.Event()
    script = Script([[call("quote", {})], [call("wait_long", {})], [text("x")]])
    rt = make_runtime(script, tools)
    async for e in rt.run(_req("buy if below 1500", cancel=cancel)):
        if isinstance(e, ev.ToolStart) and e.name == "wait_long":
            cancel.set()
    note = store.messages["s1"][-1]
    assert note.meta == {"abandoned": "cancelled"}
    assert "Only the tool results above were carried out" in note.text


async def test_a_cancel_after_the_answer_adds_nothing(store, make_runtime):
    script = Script([[text("Done.")]])
    rt = make_runtime(script, Toolset("none"))
    await collect(rt.run(_req("hi")))
    # a /cancel that arrives after the reply: the request was answered, nothing to mark
    assert AgentRuntime._abandoned_note(list(store.messages["s1"]), "cancelled") == []
