"""What a command handler may see and do: the chat's facts, the sender, the arguments, `say()`, and
narrow capabilities. Handlers never see the gateway; the gateway builds one `CommandContext` per
command in one place (`bot/commands/binding.py`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from adapters.base import ChatRef, UserRef
from agent import ApprovalError, Message, StandingApproval, TurnRecord

if TYPE_CHECKING:
    from adapters.commandspec import CommandSpec
    from agent import Skill, TaskRecord
    from agent.events import Compaction
    from markets.alerts import Alert
    from memory.links import Identity, LinkedIdentity, LinkOffer
    from memory.tools import MemoryServices


class ChatSettings(Protocol):
    """The chat's stored settings."""

    async def set_lang(self, lang: str) -> None: ...

    async def set_model(self, model: str | None) -> None: ...

    async def new_session(self) -> str:
        """Point the chat at a fresh session; returns its id."""
        ...


class TurnControl(Protocol):
    """The chat's turns: the running one, the one waiting on a card or question, new ones."""

    def is_running(self) -> bool: ...

    def stop_running(self) -> None:
        """Signal the chat's turn (if any) to stop at its next step."""

    async def waiting(self) -> TurnRecord | None:
        """The suspended turn waiting on an approval card or a question, if any."""

    def may_close(self, turn: TurnRecord) -> bool:
        """May the sender close this waiting turn (its requester or an approver)?"""

    async def close_waiting(self, turn: TurnRecord) -> None:
        """Close a waiting turn as "moved on" (nothing runs; the card shows it)."""

    async def decide(self, approval_id: str, command: str) -> ApprovalError | None:
        """/approve or /deny an approval by id; None when applied, else why it was refused."""

    def run_skill(self, text: str) -> None:
        """Start (or queue behind the running turn) a turn with this text as the message."""


class RuntimeOps(Protocol):
    async def end_session(self, session_id: str) -> None: ...

    async def compact_now(self, session_id: str, model: str | None = None) -> Compaction | None: ...


class StoreOps(Protocol):
    async def load_messages(self, session_id: str) -> list[Message]: ...

    async def replace_messages(self, session_id: str, messages: list[Message]) -> None: ...

    async def open_turn(self, session_id: str) -> TurnRecord | None: ...

    async def list_standing(
        self, chat_key: str | None, now: datetime, tool: str | None = None
    ) -> list[StandingApproval]: ...

    async def revoke_standing(self, chat_key: str | None, rule_id: str | None) -> int: ...


class TaskOps(Protocol):
    """The background-task ledger (agent/background_tasks.py TaskManager), as /tasks uses it."""

    async def list(self, session_id: str) -> list[TaskRecord]: ...

    async def get(self, task_id: str) -> TaskRecord | None: ...

    async def cancel(self, task_id: str, *, session_id: str | None = None) -> TaskRecord | None: ...


class ScheduleOps(Protocol):
    """Scheduled briefs (scheduler/service.py ScheduleService), as /brief and /status use them."""

    async def handle_brief_command(
        self, chat_key: str, user_id: str, text: str, *, lang: str = "en"
    ) -> str: ...

    async def status_lines(self, chat_key: str, *, lang: str = "en") -> list[str]: ...


class AlertOps(Protocol):
    """The market alerts (markets/alerts.py AlertStore), as /alerts uses them."""

    async def alerts(self, user_id: str, include_done: bool = False) -> list[Alert]: ...

    async def remove(self, user_id: str, alert_id: int) -> Alert: ...

    async def watchlist(self, user_id: str, market: str | None = None) -> list[str]: ...


class LinkOps(Protocol):
    """Identity links (memory/links.py LinkStore), as /link and /unlink use them."""

    async def issue(self, who: Identity) -> tuple[str, datetime]: ...

    async def peek(self, code: str, joiner: Identity) -> LinkOffer: ...

    async def redeem(self, code: str, joiner: Identity) -> str: ...

    async def members(self, identity: str) -> list[LinkedIdentity]: ...

    async def unlink(self, identity: str) -> None: ...

    async def account_of(self, identity: str) -> str: ...


class SkillOps(Protocol):
    def get(self, name: str) -> Skill | None: ...

    @property
    def skills(self) -> dict[str, Skill]: ...


@dataclass
class CommandServices:
    """The services commands use, wired once by the composition root (bot/chat_setup.py)."""

    runtime: RuntimeOps
    store: StoreOps
    models: Sequence[str] = ()
    default_model: str = ""
    context_window: Callable[[str | None], int] = lambda _m: 65_536
    memory: MemoryServices | None = None
    tasks: TaskOps | None = None
    schedules: ScheduleOps | None = None
    skills: SkillOps | None = None
    alerts: AlertOps | None = None
    links: LinkOps | None = None
    #: more lines for /status (market calendar, running tasks, briefs, MCP servers), per language
    status_extra: Callable[[str, str, str], Awaitable[list[str]]] | None = None
    #: every command's definition, for /help
    specs: Callable[[], Sequence[CommandSpec]] = lambda: ()


@dataclass
class CommandContext:
    """One command in one chat."""

    name: str
    args: str
    chat: ChatRef
    chat_key: str
    session_id: str
    lang: str
    model: str | None  # the chat's chosen model; None: the default
    user: UserRef
    say: Callable[[str], Awaitable[Any]]
    settings: ChatSettings
    turn: TurnControl
    services: CommandServices

    @property
    def argv(self) -> list[str]:
        return self.args.split()

    @property
    def current_model(self) -> str:
        return self.model or self.services.default_model
