"""The agent runtime: typed messages, providers, tools and the loop. Depends only on `config`.

The names below are what the rest of tapebot (bot/ above all) builds on: the runtime and its turn,
the records it stores through its ports, approvals, background tasks, skills and MCP, and the errors
it raises. Import them from here (`from agent import AgentRuntime`); a submodule's other names are
its own business. The turn's events are the `agent.events` module (`from agent import events as ev`).

Each name loads its submodule on first use (PEP 562), so importing one light part of the package
(`agent.errors`, say) does not load the runtime, pydantic and the tools with it. Modules inside
`agent` import from their sibling modules, never from this surface, so it adds no import cycle.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.approval import Requester
    from agent.background_tasks import TaskManager
    from agent.cancel import CancelSignal
    from agent.consent import StandingApproval
    from agent.context_hooks import CompactingHooks, TaskTracker
    from agent.elicit import LiveQuestions
    from agent.errors import (
        ApprovalAlreadyDecided,
        ApprovalError,
        ApprovalExpired,
        ApprovalForeignChat,
        ApprovalNotFound,
        NotAnApprover,
        NoticeDeferred,
        StorageError,
    )
    from agent.mcp_client import McpManager
    from agent.messages import Message
    from agent.ports import ApprovalRecord, Queued, Receipt, TurnRecord, UsageRecord, WaitingState
    from agent.providers.base import ModelClient
    from agent.redact import Redactor
    from agent.runtime import AgentRuntime, RuntimeConfig, TurnRequest
    from agent.skills import Skill, SkillLibrary
    from agent.task_ledger import TaskRecord
    from agent.tools.registry import Toolset, ToolSpec

# public name -> the submodule that defines it
_HOME: dict[str, str] = {
    "AgentRuntime": "agent.runtime",
    "RuntimeConfig": "agent.runtime",
    "TurnRequest": "agent.runtime",
    "Message": "agent.messages",
    "ApprovalRecord": "agent.ports",
    "Queued": "agent.ports",
    "Receipt": "agent.ports",
    "TurnRecord": "agent.ports",
    "UsageRecord": "agent.ports",
    "WaitingState": "agent.ports",
    "ModelClient": "agent.providers.base",
    "CancelSignal": "agent.cancel",
    "Requester": "agent.approval",
    "StandingApproval": "agent.consent",
    "LiveQuestions": "agent.elicit",
    "TaskManager": "agent.background_tasks",
    "TaskRecord": "agent.task_ledger",
    "CompactingHooks": "agent.context_hooks",
    "TaskTracker": "agent.context_hooks",
    "McpManager": "agent.mcp_client",
    "Skill": "agent.skills",
    "SkillLibrary": "agent.skills",
    "Toolset": "agent.tools.registry",
    "ToolSpec": "agent.tools.registry",
    "Redactor": "agent.redact",
    "ApprovalAlreadyDecided": "agent.errors",
    "ApprovalError": "agent.errors",
    "ApprovalExpired": "agent.errors",
    "ApprovalForeignChat": "agent.errors",
    "ApprovalNotFound": "agent.errors",
    "NotAnApprover": "agent.errors",
    "NoticeDeferred": "agent.errors",
    "StorageError": "agent.errors",
}

__all__ = [
    "AgentRuntime",
    "ApprovalAlreadyDecided",
    "ApprovalError",
    "ApprovalExpired",
    "ApprovalForeignChat",
    "ApprovalNotFound",
    "ApprovalRecord",
    "CancelSignal",
    "CompactingHooks",
    "LiveQuestions",
    "McpManager",
    "Message",
    "ModelClient",
    "NotAnApprover",
    "NoticeDeferred",
    "Queued",
    "Receipt",
    "Redactor",
    "Requester",
    "RuntimeConfig",
    "Skill",
    "SkillLibrary",
    "StandingApproval",
    "StorageError",
    "TaskManager",
    "TaskRecord",
    "TaskTracker",
    "ToolSpec",
    "Toolset",
    "TurnRecord",
    "TurnRequest",
    "UsageRecord",
    "WaitingState",
]


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'agent' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value  # found once; later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
