"""Ports the runtime needs from the outside world. `memory/` implements the storage ports with
SQLAlchemy; tests may use the in-memory versions in `agent/inmemory.py`.

The durable turn (its execution state) is a `TurnRecord`: status, each tool call's
execution status, the visible plan and, when suspended, a `WaitingState`. The conversation itself
lives in the session's message list, appended as it is produced, so a turn can be resumed from the
database after a restart: the unanswered tool calls of the last assistant message are exactly the
work left to do.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from agent.consent import StandingApproval
from agent.messages import Message
from agent.usage import Usage

TurnStatus = Literal["running", "suspended", "completed", "cancelled", "failed"]
CallStatus = Literal["pending", "awaiting_approval", "executing", "done", "denied", "cancelled", "failed"]
ApprovalStatus = Literal["pending", "approved", "denied", "expired", "cancelled"]

#: An inbound message's (platform, update id), or a task notice's ("task", task id). The gateway
#: records the message under it when it arrives; the store clears it in the transaction that writes
#: the message into the history, so one queued behind a running turn survives a crash (opaque to
#: the runtime).
Receipt = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Queued:
    """A user message that arrived during a turn (the turn's inbox), with its receipt if any."""

    message: Message
    receipt: Receipt | None = None


def utcnow() -> datetime:
    return datetime.now(UTC)


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def args_hash(tool: str, arguments: dict[str, Any] | None) -> str:
    return hashlib.sha256(f"{tool}\n{canonical_json(arguments)}".encode()).hexdigest()


def execution_key(session_id: str, tool: str, arguments: dict[str, Any] | None, call_id: str) -> str:
    """The idempotency key of one side-effecting call: bound to the session, the tool, the
    canonical arguments AND the call id. Several OpenAI-compatible servers reuse call ids, so the
    id alone would make a new, different order replay an old one; the same call retried (a resume,
    a double tap) has the same key and replays."""
    digest = hashlib.sha256(
        "\n".join((session_id, tool, canonical_json(_plain_numbers(arguments)), call_id)).encode()
    ).hexdigest()
    return f"exec:{digest}"


def client_key(source: str, user_id: str, key: str) -> str:
    """The stored form of a caller-supplied idempotency key (an MCP client's): scoped by source
    and user, never by process, so a retry after a reconnect or a restart finds the first order."""
    digest = hashlib.sha256("\n".join((source, user_id, key)).encode()).hexdigest()
    return f"{source}-key:{digest}"


def _plain_numbers(value: Any) -> Any:
    """Integral floats as ints, so 100 and 100.0 are one canonical argument."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _plain_numbers(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_numbers(v) for v in value]
    return value


class PlanStep(BaseModel):
    text: str
    status: Literal["pending", "in_progress", "done", "skipped"] = "pending"


class WaitingTarget(BaseModel):
    """What a suspended turn's answer goes to: the call waiting on it, its tool, and for an
    approval its id. Stored inside the turn's JSON with these keys (rows written when it was a
    plain dict read the same)."""

    call_id: str = ""
    tool: str = ""
    approval_id: str = ""


class WaitingState(BaseModel):
    """The turn is suspended waiting for the user. Silence is never consent."""

    kind: Literal["approval", "question"]
    question: str
    intent: str = ""
    options: list[str] = Field(default_factory=list)
    pending_fields: list[str] = Field(default_factory=list)
    confirmation_target: WaitingTarget = Field(default_factory=WaitingTarget)
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime | None = None


class TurnRecord(BaseModel):
    id: str
    session_id: str
    status: TurnStatus = "running"
    model: str = ""
    rounds: int = 0
    calls: dict[str, CallStatus] = Field(default_factory=dict)
    calls_approval: dict[str, str] = Field(default_factory=dict)  # call id -> approval id
    requester: str = ""
    chat_key: str = ""
    approvers: list[str] = Field(default_factory=list)
    account: str = ""  # the Requester's account, kept for a resumed turn
    plan: list[PlanStep] = Field(default_factory=list)
    waiting: WaitingState | None = None
    unattended: bool = False
    error: str = ""
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    # a completed chat turn's answer until the chat has been sent it (`TurnStore.answer_sent`);
    # stored beside the record, not in it
    answer: str | None = Field(default=None, exclude=True)


class ApprovalRecord(BaseModel):
    """An approval bound to exactly one action. Resolved by compare-and-set from `pending`."""

    id: str  # short random id, used as callback data
    session_id: str
    turn_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]
    args_hash: str
    requester: str = ""
    approvers: list[str] = Field(default_factory=list)
    chat_key: str = ""
    status: ApprovalStatus = "pending"
    decided_by: str = ""
    decision: str = ""  # once | always | deny | edit | expired
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime | None = None
    message_ref: str = ""  # platform message id of the card, to edit it to its final state


class UsageRecord(BaseModel):
    session_id: str
    turn_id: str
    model: str
    usage: Usage
    cost: float = 0.0
    created_at: datetime = Field(default_factory=utcnow)

    model_config = {"arbitrary_types_allowed": True}


class SessionStore(Protocol):
    async def get_or_create_session(
        self, session_id: str, *, chat_key: str = "", user_id: str = ""
    ) -> None: ...

    async def load_messages(self, session_id: str) -> list[Message]: ...

    async def append_messages(self, session_id: str, messages: list[Message]) -> None: ...

    async def replace_messages(self, session_id: str, messages: list[Message]) -> None: ...

    async def commit(
        self,
        session_id: str,
        *,
        messages: Sequence[Message] = (),
        turn: TurnRecord | None = None,
        usage: UsageRecord | None = None,
        received: Sequence[Receipt] = (),
    ) -> None:
        """Persist one step atomically: new messages, the turn record and a usage row; clears the
        `received` receipts of the messages among them."""
        ...


class TurnStore(Protocol):
    async def save_turn(self, turn: TurnRecord) -> None: ...

    async def load_turn(self, turn_id: str) -> TurnRecord | None: ...

    async def open_turn(self, session_id: str) -> TurnRecord | None:
        """The session's running or suspended turn, if any."""
        ...

    async def answer_sent(self, turn_id: str) -> None:
        """The chat has been sent the turn's answer: it is no longer kept for a restart."""
        ...

    async def unsent_answers(self) -> list[TurnRecord]:
        """Completed turns whose answer was stored but not sent (a crash came between), oldest
        first, each with its `answer`."""
        ...


class ApprovalStore(Protocol):
    async def create_approval(self, approval: ApprovalRecord) -> None: ...

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None: ...

    async def resolve_approval(
        self,
        approval_id: str,
        *,
        status: ApprovalStatus,
        decided_by: str,
        decision: str,
        receipt: Receipt | None = None,
    ) -> bool:
        """Atomically move a pending approval to `status`. False if it was not pending.
        `receipt`: the tap that decided it, recorded as processed in the same transaction (False,
        and nothing changed, if it was recorded before): a crash can never keep one without the
        other."""
        ...

    # Standing approvals (agent/consent.py): policy records, written only by the gate when a
    # human taps "Always allow" and by `/rules` / `tapebot rules`, never by a tool.
    async def add_standing(self, rule: StandingApproval) -> None: ...

    async def list_standing(
        self, chat_key: str | None, now: datetime, tool: str | None = None
    ) -> list[StandingApproval]: ...

    async def revoke_standing(self, chat_key: str | None, rule_id: str | None) -> int: ...


class UsageStore(Protocol):
    async def record_usage(self, record: UsageRecord) -> None: ...


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return utcnow()


class AccountDirectory:
    """Which account an identity ("telegram:111") acts for: "" when it is not linked. This one
    links nobody; memory.links.LinkStore reads the links (the runtime finds it in its deps)."""

    async def account_of(self, identity: str) -> str:
        return ""
