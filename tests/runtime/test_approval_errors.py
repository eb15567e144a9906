"""Each refused approval decision raises its own ApprovalError subclass (callers catch by type, never
by reading the message); the messages stay what users and logs saw before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.approval import ApprovalGate, Requester, Suspend
from agent.errors import (
    AlwaysNotOffered,
    ApprovalAlreadyDecided,
    ApprovalError,
    ApprovalExpired,
    ApprovalForeignChat,
    ApprovalNotFound,
    NotAnApprover,
    TapebotError,
)
from agent.inmemory import InMemoryStore
from agent.messages import ToolCallPart
from agent.ports import TurnRecord
from agent.tools.registry import ToolSpec
from tests.fakes.clock import FakeClock


async def _pending(gate: ApprovalGate, tool: str = "write_file", args: dict | None = None):
    spec = ToolSpec(tool, "", {}, requires_approval=True)
    call = ToolCallPart(id="c1", name=tool, arguments=args or {"path": "a.txt", "content": "x"})
    with pytest.raises(Suspend) as s:
        await gate.check(spec, call, TurnRecord(id="t1", session_id="s"), Requester("u1", "tg:1", ("u1",)))
    return s.value.approval


@pytest.fixture
def gate():
    return ApprovalGate(
        InMemoryStore(), FakeClock(datetime(2026, 1, 5, 9, tzinfo=UTC)), ttl=timedelta(minutes=10)
    )


async def test_unknown_id(gate):
    with pytest.raises(ApprovalNotFound, match="unknown or forged approval id"):
        await gate.decide("nope", "u1", "once")


async def test_not_an_approver(gate):
    record = await _pending(gate)
    with pytest.raises(NotAnApprover, match="you are not allowed to decide this approval"):
        await gate.decide(record.id, "u2", "once")


async def test_already_decided(gate):
    record = await _pending(gate)
    await gate.decide(record.id, "u1", "once")
    with pytest.raises(ApprovalAlreadyDecided, match="this approval was already approved"):
        await gate.decide(record.id, "u1", "deny")


async def test_expired(gate):
    record = await _pending(gate)
    gate.clock.advance(minutes=11)
    with pytest.raises(ApprovalExpired, match="this approval expired; nothing was executed"):
        await gate.decide(record.id, "u1", "once")
    # and it stays expired: a later tap (after a restart, say) is told so, by type too
    with pytest.raises(ApprovalExpired, match="this approval was already expired"):
        await gate.decide(record.id, "u1", "once")


async def test_always_not_offered(gate):
    record = await _pending(gate, "exec_command", {"command": "ls"})
    with pytest.raises(AlwaysNotOffered, match="always allow is not offered for this action"):
        await gate.decide(record.id, "u1", "always")


def test_the_tree():
    for cls in (
        ApprovalNotFound,
        NotAnApprover,
        ApprovalAlreadyDecided,
        ApprovalExpired,
        AlwaysNotOffered,
        ApprovalForeignChat,
    ):
        assert issubclass(cls, ApprovalError) and issubclass(cls, TapebotError)
    assert str(ApprovalForeignChat()) == "this approval belongs to another chat"
