"""Traces carry what the tools did: a `tool_result` line per call with its name,
arguments, a result preview, elapsed time and status, and `approval` lines for a card requested and
decided — every value redacted."""

from __future__ import annotations

import json

from agent.approval import Requester
from agent.redact import Redactor
from agent.runtime import TurnRequest
from agent.scratchpad import Scratchpad
from agent.tools.registry import ToolContext, Toolset
from tests.fakes.runtime_kit import Script, call, collect, text

SECRET = "sk-live-0123456789abcdefSECRET"
tools = Toolset("trace")


@tools.tool(concurrency_safe=True)
async def lookup(ctx: ToolContext, code: str) -> str:
    """Look a code up."""
    return f"{code} closed at 10.5 with key {SECRET}"


@tools.tool
async def breaks(ctx: ToolContext) -> str:
    """Always fails."""
    raise RuntimeError("boom")


@tools.tool(requires_approval=True)
async def place(ctx: ToolContext, qty: int) -> str:
    """Needs approval."""
    return f"placed {qty}"


def lines(tmp_path) -> list[dict]:
    return [json.loads(line) for p in sorted(tmp_path.glob("traces/*/*.jsonl")) for line in p.open()]


def factory(tmp_path):
    redactor = Redactor([SECRET])
    return lambda turn_id, session_id: Scratchpad(tmp_path / "traces", turn_id, session_id, redactor)


def req() -> TurnRequest:
    return TurnRequest(session_id="s1", text="go", who=Requester("u1", "tg:1", ("u1",)))


async def test_tool_results_are_traced_with_arguments_preview_elapsed_and_status(make_runtime, tmp_path):
    script = Script([[call("lookup", {"code": "600519"}), call("breaks", {})], [text("done")]])
    rt = make_runtime(script, tools, trace_factory=factory(tmp_path))
    await collect(rt.run(req()))
    results = [e for e in lines(tmp_path) if e["kind"] == "tool_result"]
    assert [(e["name"], e["status"]) for e in results] == [("lookup", "ok"), ("breaks", "error")]
    ok, failed = results
    assert ok["arguments"] == {"code": "600519"}
    assert "closed at 10.5" in ok["preview"] and SECRET not in json.dumps(ok)
    assert isinstance(ok["elapsed"], float) and ok["elapsed"] >= 0
    assert "boom" in failed["preview"]


async def test_approvals_are_traced_when_requested_and_decided(make_runtime, store, tmp_path):
    script = Script([[call("place", {"qty": 100})], [text("placed")]])
    rt = make_runtime(script, tools, trace_factory=factory(tmp_path))
    events = await collect(rt.run(req()))
    required = next(e for e in events if e.kind == "approval_required")
    await rt.decide(required.approval_id, "u1", "once")
    await collect(rt.resume(required.turn_id))
    approvals = [e for e in lines(tmp_path) if e["kind"] == "approval"]
    assert [a["status"] for a in approvals] == ["requested", "approved"]
    assert approvals[0]["tool"] == "place" and approvals[0]["arguments"] == {"qty": 100}
    assert approvals[1]["by"] == "u1" and approvals[1]["decision"] == "once"
    assert [e["status"] for e in lines(tmp_path) if e["kind"] == "tool_result"] == ["ok"]
