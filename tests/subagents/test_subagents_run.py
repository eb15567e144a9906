"""Running sub-agents: results, budgets, timeouts, errors, cancellation, background task ids,
progress, and delegation from a parent turn."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest

from agent import events as ev
from agent.approval import Requester
from agent.errors import FatalModelError
from agent.inmemory import InMemoryStore
from agent.providers.scripted import ScriptedClient, reply, tool_call
from agent.runtime import AgentRuntime, TurnRequest
from agent.subagents import ANALYSIS, RESEARCH, TRADING, SubAgentServices, run_subagent, subagent_tools
from agent.tokens import estimate_messages
from agent.tools.registry import Deps, Toolset
from agent.usage import Usage
from tests.subagents.conftest import FakeBackground


async def test_basic_run_returns_a_completed_structured_result(services, sub_client):
    sub_client.add(
        reply("Market is ranging as of 2026-07-24.", usage=Usage(input_tokens=100, output_tokens=20))
    )
    result = await run_subagent("research", "How is the market?", services=services)
    assert result.agent == "research" and result.status == "completed"
    assert result.result == "Market is ranging as of 2026-07-24."
    assert result.usage == {"input_tokens": 100, "output_tokens": 20}
    assert result.rounds == 1 and result.tool_calls == [] and result.error == ""
    assert not result.context_truncated and not result.result_truncated
    assert result.policy.next_action == "use_result" and result.elapsed >= 0
    # its own system prompt and only its whitelisted schemas
    request = sub_client.requests[0]
    assert "research sub-agent" in request.system
    assert {t.name for t in request.tools} == {
        "analyze_stock",
        "get_market_overview",
        "get_market_history",
        "query_history",
        "screen_stocks",
    }
    assert set(json.loads(result.model_dump_json())) >= {
        "agent",
        "status",
        "result",
        "usage",
        "elapsed",
        "rounds",
        "tool_calls",
        "context_truncated",
        "result_truncated",
        "error",
        "policy",
    }


async def test_run_with_tool_calls(services, sub_client, probe):
    sub_client.add(
        reply(tool_calls=[("get_market_overview", {}), ("analyze_stock", {"code": "600519"})]),
        reply("600519 is in phase C; market ranging."),
    )
    result = await run_subagent("analysis", "Diagnose 600519", services=services)
    assert result.status == "completed" and result.rounds == 2
    assert result.tool_calls == ["get_market_overview", "analyze_stock"]
    assert probe.calls == ["get_market_overview", "analyze_stock 600519"]
    assert probe.contexts[0].unattended  # sub-agents never have a human to approve


async def test_refused_tools_are_errors_the_sub_agent_sees_and_never_run(services, sub_client, probe):
    sub_client.add(
        reply(
            tool_calls=[
                ("update_portfolio", {"code": "600519", "shares": 0}),
                ("exec_command", {"command": "ls"}),
            ]
        ),
        reply("I can only propose: sell 600519."),
    )
    result = await run_subagent("trading", "Should I sell 600519?", services=services)
    assert result.status == "completed"
    assert probe.calls == []  # nothing ran
    errors = [m.tool_results[0] for m in sub_client.requests[1].messages if m.role == "tool"]
    assert len(errors) == 2 and all(e.is_error for e in errors)
    assert all("not available to the trading sub-agent" in e.content for e in errors)
    assert {t.name for t in sub_client.requests[0].tools}.isdisjoint(
        {"update_portfolio", "execute_trade", "exec_command"}
    )


async def test_per_tool_timeout_is_a_tool_error_not_a_stuck_agent(services, sub_client, probe):
    sub_client.add(
        reply(tool_calls=[("get_market_history", {"code": "600519"})]),
        reply("History unavailable; phase unknown."),
    )
    quick = replace(RESEARCH, tool_timeout=0.05)
    result = await run_subagent(quick, "history of 600519", services=services)
    assert result.status == "completed" and probe.cancelled
    error = next(m.tool_results[0] for m in sub_client.requests[1].messages if m.role == "tool")
    assert error.is_error and "timed_out" in error.content


async def test_total_timeout_stops_the_agent_with_fallback_policy(services, sub_client, probe):
    sub_client.add(reply(tool_calls=[("get_market_history", {"code": "600519"})]))
    short = replace(RESEARCH, timeout=0.2)
    result = await run_subagent(short, "history", services=services)
    assert result.status == "timeout" and probe.cancelled
    assert result.policy.next_action == "fallback_to_direct_tools" and result.policy.retryable
    assert result.policy.fallback_tools == ["get_market_overview", "query_history"]  # the ones that exist
    assert result.tool_calls == ["get_market_history"]
    assert "0 s" in result.error or "did not finish" in result.error


async def test_model_error_gives_error_policy(services, sub_client):
    sub_client.add(FatalModelError("bad key", model="scripted"))
    result = await run_subagent("trading", "plan", services=services)
    # the provider's own words stay in the log: the sub-agent reports the generic reason
    assert (
        result.status == "error" and "rejected the request" in result.error and "bad key" not in result.error
    )
    assert result.policy.next_action == "fallback_to_direct_tools" and result.policy.retryable
    assert result.policy.fallback_tools == ["portfolio", "generate_strategy_decision", "get_market_overview"]


async def test_unexpected_crash_gives_error(services, sub_client):
    sub_client.add(RuntimeError("boom"))
    result = await run_subagent("analysis", "x", services=services)
    assert result.status == "error" and "boom" in result.error


async def test_empty_answer_uses_fallback_tools_and_is_not_retryable(services, sub_client):
    sub_client.add(reply(""))
    result = await run_subagent("analysis", "x", services=services)
    assert result.status == "empty"
    assert result.policy.next_action == "fallback_to_direct_tools" and not result.policy.retryable
    assert result.policy.fallback_tools == ["analyze_stock", "portfolio", "get_market_overview"]


async def test_round_limit_without_conclusion_is_empty(services):
    looping = ScriptedClient(default=reply(tool_calls=[("get_market_overview", {})]))
    svc = replace(services, model_for=lambda _m: looping)
    result = await run_subagent(replace(TRADING, max_rounds=2), "x", services=svc)
    assert result.status == "empty" and "2 tool rounds" in result.error
    assert len(looping.requests) == 2


async def test_start_error_still_has_a_policy(services):
    broken = replace(services, toolset=None)  # type: ignore[arg-type]
    result = await run_subagent("research", "x", services=broken)
    assert result.status == "error" and "could not start" in result.error
    assert result.policy.next_action == "fallback_to_direct_tools"


async def test_cancel_event_returns_cancelled_with_stop_policy(services, sub_client, probe):
    sub_client.add(reply(tool_calls=[("get_market_history", {"code": "1"})]))
    cancel = asyncio.Event()

    async def press_cancel():
        await probe.started.wait()
        cancel.set()

    presser = asyncio.create_task(press_cancel())
    result = await run_subagent("research", "x", services=services, cancel=cancel)
    await presser
    assert result.status == "cancelled" and probe.cancelled
    assert result.policy.next_action == "stop_and_report_cancelled" and result.policy.fallback_tools == []


async def test_cancelling_the_calling_task_stops_the_sub_agent_and_propagates(services, sub_client, probe):
    sub_client.add(reply(tool_calls=[("get_market_history", {"code": "1"})]))
    task = asyncio.create_task(run_subagent("research", "x", services=services))
    await probe.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert probe.cancelled


async def test_context_over_budget_is_trimmed_keeping_the_latest_part(services, sub_client):
    sub_client.add(reply("ok"))
    context = "".join(f"note {i}: 300750 volume dried up near support\n" for i in range(6000))
    result = await run_subagent("trading", "Plan for 300750", context, services=services)
    assert result.context_truncated
    request = sub_client.requests[0]
    user = request.messages[0].text
    assert "[context trimmed" in user and "note 5999:" in user and "note 0:" not in user
    assert estimate_messages(request.messages, request.system, request.tools) <= TRADING.context_budget_tokens


async def test_tool_results_are_shrunk_to_the_input_budget_during_the_run(services, sub_client):
    sub_client.add(reply(tool_calls=[("query_history", {"query": "600519"})]), reply("summary"))
    tight = replace(RESEARCH, context_budget_tokens=1_200)
    result = await run_subagent(tight, "What did we decide on 600519?", services=services)
    assert result.status == "completed" and result.context_truncated
    tool_msg = next(m for m in sub_client.requests[1].messages if m.role == "tool")
    assert "trimmed to fit the sub-agent's input budget" in tool_msg.tool_results[0].content


async def test_long_answer_is_cut_to_the_output_budget(services, sub_client):
    sub_client.add(reply("z" * 5000))
    result = await run_subagent("trading", "x", services=services)
    assert result.status == "completed" and result.result_truncated
    assert len(result.result) <= TRADING.result_budget_chars


async def test_background_tools_hand_task_ids_back_to_the_parent_session(services, sub_client):
    runner = FakeBackground()
    svc = replace(services, background=runner)
    sub_client.add(reply(tool_calls=[("screen_stocks", {"top": 10})]), reply("Screen started as bg_0001."))
    result = await run_subagent("research", "screen", services=svc, session_id="parent-session")
    assert result.status == "completed" and result.task_ids == ["bg_0001"]
    assert runner.submitted == [("bg_0001", "screen_stocks", "parent-session")]
    assert "bg_0001" in result.policy.instruction


async def test_delegation_from_a_parent_turn_forwards_progress_and_returns_the_result(
    parent_tools, services, sub_client, tmp_path
):
    sub_client.add(reply(tool_calls=[("analyze_stock", {"code": "600519"})]), reply("600519: phase C, hold."))
    parent_client = ScriptedClient(
        [
            reply(tool_calls=[tool_call("delegate_to_analysis", {"task": "Diagnose 600519"}, "c1")]),
            reply("Done."),
        ]
    )
    tools = Toolset.combine("tapebot", parent_tools, subagent_tools)
    runtime = AgentRuntime(
        model_for=lambda _m: parent_client,
        tools=tools,
        store=InMemoryStore(),
        deps=Deps(replace(services, toolset=tools)),
        workspace=tmp_path,
    )
    events = [
        e async for e in runtime.run(TurnRequest("s1", "check 600519", who=Requester("u1", "tg:1", ("u1",))))
    ]
    assert events[-1].status == "completed"
    lines = [e.detail for e in events if isinstance(e, ev.ToolProgress) and e.stage == "subagent"]
    assert any("analysis · analyze_stock" in line for line in lines)
    assert lines[-1] == "analysis · completed"
    result = next(e for e in events if isinstance(e, ev.ToolResult) and e.name == "delegate_to_analysis")
    payload = json.loads(result.content)
    assert payload["status"] == "completed" and payload["result"] == "600519: phase C, hold."
    assert payload["policy"]["next_action"] == "use_result"
    # the sub-agent did not see the delegate tools (no recursion)
    assert not any(t.name.startswith("delegate_to_") for t in sub_client.requests[0].tools)


async def test_cancelling_the_parent_turn_cancels_the_sub_agent(
    parent_tools, services, sub_client, probe, tmp_path
):
    sub_client.add(reply(tool_calls=[("get_market_history", {"code": "600519"})]))
    parent_client = ScriptedClient([reply(tool_calls=[("delegate_to_research", {"task": "history"})])])
    tools = Toolset.combine("tapebot", parent_tools, subagent_tools)
    store = InMemoryStore()
    runtime = AgentRuntime(
        model_for=lambda _m: parent_client, tools=tools, store=store, deps=Deps(services), workspace=tmp_path
    )
    cancel = asyncio.Event()

    async def press_cancel():
        await probe.started.wait()
        cancel.set()

    presser = asyncio.create_task(press_cancel())
    events = [e async for e in runtime.run(TurnRequest("s1", "go", who=Requester("u1"), cancel=cancel))]
    await presser
    assert events[-1].status == "cancelled"
    assert probe.cancelled
    answered = [m.tool_results[0] for m in store.messages["s1"] if m.role == "tool"]
    assert len(answered) == 1 and answered[0].is_error  # the delegate call is answered, not left open


async def test_delegate_without_services_returns_an_error_result():
    from agent.subagents import delegate
    from agent.tools.registry import ToolContext

    out = await delegate(ToolContext(), "analysis", "x")
    assert out["status"] == "error" and out["policy"]["next_action"] == "fallback_to_direct_tools"


def test_services_default_fields():
    svc = SubAgentServices(model_for=lambda _m: None, toolset=Toolset("x"))  # type: ignore[arg-type,return-value]
    assert svc.background is None and svc.model is None and ANALYSIS.name == "analysis"
