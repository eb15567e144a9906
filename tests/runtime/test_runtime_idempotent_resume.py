"""Crash during execution of an idempotent call: an order cut off by a
crash is not reported as "may or may not have completed" — on resume it consults its key and
either finds its fill or places the order once. A property over any mix of calls left behind:
every order call ends with exactly one fill and one result; a non-idempotent call that had started
is still never run again.
"""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.runtime import INTERRUPTED_CALL, AgentRuntime
from agent.tools.registry import ToolContext, Toolset
from tests.fakes.runtime_kit import Script, collect, interrupted_turn, results_by_call, text

fills: dict[str, int] = {}  # the "broker": fills by idempotency key
acted: list[str] = []
tools = Toolset("idempotent")


@tools.tool(requires_approval=False, side_effect="mutating", idempotent=True)
async def order(ctx: ToolContext, tag: str) -> str:
    """Place an order whose key is derived from the call (the paper broker's contract)."""
    key = f"{ctx.call_id}:{tag}"
    if key in fills:
        return f"already filled {tag}"
    fills[key] = fills.get(key, 0) + 1
    return f"filled {tag}"


@tools.tool(side_effect="mutating")
async def act(ctx: ToolContext, tag: str) -> str:
    """A side effect with no key."""
    acted.append(tag)
    return f"did {tag}"


# executing_before: cut off before the broker wrote anything; executing_after: the fill was
# committed and the result never stored (the crash came between)
STATE = st.sampled_from(["pending", "executing_before", "executing_after", "done_after", "answered"])
CALLS = st.lists(st.tuples(st.sampled_from(["order", "act"]), STATE), min_size=1, max_size=6)


async def scenario(calls: list[tuple[str, str]]) -> None:
    fills.clear()
    acted.clear()
    for i, (name, state) in enumerate(calls):
        if name == "order" and (state == "answered" or state.endswith("_after")):
            fills[f"c{i}:t{i}"] = 1  # the broker had committed the fill
    store = await interrupted_turn([(name, state.split("_")[0]) for name, state in calls])
    rt = AgentRuntime(model_for=lambda _m: Script([[text("finished")]]), tools=tools, store=store)

    rechecked: list[str] = []
    cut_off = await rt.settle_interrupted("t_1", rechecked)
    events = await collect(rt.resume("t_1"))

    started = {i for i, (_, s) in enumerate(calls) if s not in ("pending", "answered")}
    assert cut_off == [calls[i][0] for i in sorted(started) if calls[i][0] == "act"]
    assert rechecked == [calls[i][0] for i in sorted(started) if calls[i][0] == "order"]
    # every order: exactly one fill, whatever the crash left
    assert sorted(fills) == sorted(f"c{i}:t{i}" for i, (n, _) in enumerate(calls) if n == "order")
    assert set(fills.values()) <= {1}
    # a started call without a key is never run again; one that had not started runs once
    assert sorted(acted) == sorted(f"t{i}" for i, (n, s) in enumerate(calls) if n == "act" and s == "pending")
    results = results_by_call(store.messages["s1"])
    assert all(len(v) == 1 for v in results.values()) and len(results) == len(calls)
    for i in started:
        if calls[i][0] == "order":
            assert INTERRUPTED_CALL not in results[f"c{i}"][0]
            assert "filled" in results[f"c{i}"][0]
        else:
            assert INTERRUPTED_CALL in results[f"c{i}"][0]
    assert events[-1].kind == "done" and events[-1].text == "finished"


def test_e2_an_order_cut_off_before_the_broker_wrote_places_it_once():
    asyncio.run(scenario([("order", "executing_before")]))
    assert list(fills.values()) == [1]


def test_e2_an_order_cut_off_after_its_fill_finds_the_fill():
    asyncio.run(scenario([("order", "executing_after")]))
    assert list(fills.values()) == [1]


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(CALLS)
def test_property_an_interrupted_order_fills_exactly_once(calls):
    asyncio.run(scenario(calls))
