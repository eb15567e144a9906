"""Runtime events: the one stream every consumer reads (adapters, terminal, sub-agents, scheduler,
tests). Nobody re-implements the loop; they render these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agent.messages import ToolCallPart
from agent.usage import Usage

if TYPE_CHECKING:  # annotations only: events stay a leaf module every layer can import cheaply
    from agent.consent import StandingScope
    from agent.tools.registry import Attachment


@dataclass(frozen=True, slots=True)
class ModelStart:
    model: str
    round: int
    kind: Literal["model_start"] = "model_start"


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    text: str
    kind: Literal["thinking_delta"] = "thinking_delta"


@dataclass(frozen=True, slots=True)
class ToolCalls:
    calls: tuple[ToolCallPart, ...]
    kind: Literal["tool_calls"] = "tool_calls"


@dataclass(frozen=True, slots=True)
class ToolStart:
    call_id: str
    name: str
    arguments: dict[str, Any] | None
    kind: Literal["tool_start"] = "tool_start"


@dataclass(frozen=True, slots=True)
class ToolProgress:
    call_id: str
    name: str
    stage: str
    detail: str = ""
    percent: float | None = None
    kind: Literal["tool_progress"] = "tool_progress"


@dataclass(frozen=True, slots=True)
class ToolResult:
    call_id: str
    name: str
    content: str
    elapsed: float = 0.0
    attachments: tuple[Attachment, ...] = ()
    kind: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True)
class ToolErrorEvent:
    call_id: str
    name: str
    code: str
    message: str
    kind: Literal["tool_error"] = "tool_error"


@dataclass(frozen=True, slots=True)
class ApprovalRequired:
    """The turn is suspended until an approver decides. `approval_id` is the record to resolve."""

    approval_id: str
    turn_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]
    kind: Literal["approval_required"] = "approval_required"


@dataclass(frozen=True, slots=True)
class Question:
    """The turn asked the user something (ask_user) and is suspended in a WaitingState."""

    turn_id: str
    call_id: str
    question: str
    options: tuple[str, ...] = ()
    kind: Literal["question"] = "question"


@dataclass(frozen=True, slots=True)
class Compaction:
    before_messages: int
    after_messages: int
    archive_ref: str | None = None
    dropped: int = 0
    note: str = ""
    kind: Literal["compaction"] = "compaction"


@dataclass(frozen=True, slots=True)
class Retry:
    message: str
    reason: str
    attempt: int = 1
    model: str = ""
    kind: Literal["retry"] = "retry"


@dataclass(frozen=True, slots=True)
class UsageEvent:
    model: str
    usage: Usage
    cost: float = 0.0
    kind: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True)
class PlanUpdate:
    steps: tuple[tuple[str, str], ...]  # (text, status)
    kind: Literal["plan"] = "plan"


@dataclass(frozen=True, slots=True)
class Done:
    text: str
    turn_id: str
    rounds: int = 0
    usage: Usage = field(default_factory=lambda: Usage())
    cost: float = 0.0
    elapsed: float = 0.0
    # interrupted: the process is stopping; the turn stays open and is resumed after the restart
    status: Literal["completed", "suspended", "cancelled", "failed", "interrupted"] = "completed"
    warning: str = ""
    kind: Literal["done"] = "done"


@dataclass(frozen=True, slots=True)
class StandingApprovalUsed:
    """A call that needs approval ran under one of the chat's standing approvals ("Always
    allow"): the chat is told each time, so nothing runs on a standing rule unseen."""

    call_id: str
    tool: str
    rule_id: str
    scope: StandingScope
    kind: Literal["standing_used"] = "standing_used"


@dataclass(frozen=True, slots=True)
class Notice:
    """Something the user should know that is not part of the answer; `code` names it for the
    front end, which says it in the chat's language ("secret_masked": a key in the user's message
    was masked and not stored)."""

    code: str
    kind: Literal["notice"] = "notice"


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    message: str
    code: str = "error"
    kind: Literal["error"] = "error"


RuntimeEvent = (
    ModelStart
    | TextDelta
    | ThinkingDelta
    | ToolCalls
    | ToolStart
    | ToolProgress
    | ToolResult
    | ToolErrorEvent
    | StandingApprovalUsed
    | ApprovalRequired
    | Question
    | Compaction
    | Retry
    | UsageEvent
    | PlanUpdate
    | Done
    | Notice
    | ErrorEvent
)
