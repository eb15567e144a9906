"""Resuming a turn that a stop or a crash interrupted, as a property: for
any mix of call states left behind, a call that had started (`executing`, or `done` without a stored
result) is answered as "may or may not have completed" and never run again; a call that had not
started runs exactly once; a call already answered is left alone; every call ends with exactly one
result in the history."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.runtime import INTERRUPTED_CALL, AgentRuntime
from agent.tools.registry import ToolContext, Toolset
from tests.fakes.runtime_kit import Script, collect, interrupted_turn, results_by_call, text

ran: list[str] = []
tools = Toolset("interrupted")


@tools.tool(side_effect="mutating")
async def act(ctx: ToolContext, tag: str) -> str:
    """A side-effecting action."""
    ran.append(tag)
    return f"did {tag}"


@tools.tool(concurrency_safe=True, side_effect="read_only")
async def look(ctx: ToolContext, tag: str) -> str:
    """A read-only lookup."""
    ran.append(tag)
    return f"saw {tag}"


STATE = st.sampled_from(["pending", "executing", "done", "answered"])
CALLS = st.lists(st.tuples(st.sampled_from(["act", "look"]), STATE), min_size=1, max_size=6)


async def scenario(calls: list[tuple[str, str]]) -> None:
    ran.clear()
    store = await interrupted_turn(calls)
    rt = AgentRuntime(model_for=lambda _m: Script([[text("finished")]]), tools=tools, store=store)

    cut_off = await rt.settle_interrupted("t_1")
    events = await collect(rt.resume("t_1"))

    started = {i for i, (_, s) in enumerate(calls) if s in ("executing", "done")}
    not_started = {i for i, (_, s) in enumerate(calls) if s == "pending"}
    assert cut_off == [calls[i][0] for i in sorted(started)]
    assert sorted(ran) == sorted(f"t{i}" for i in not_started)  # exactly once each, nothing else
    results = results_by_call(store.messages["s1"])
    assert all(len(v) == 1 for v in results.values()) and len(results) == len(calls)
    for i in started:
        assert INTERRUPTED_CALL in results[f"c{i}"][0]
    assert events[-1].kind == "done" and events[-1].text == "finished"


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(CALLS)
def test_resuming_an_interrupted_turn_never_reruns_a_started_call(calls):
    asyncio.run(scenario(calls))
