"""In-memory implementations of the storage ports: the fake next to the port, for unit tests of
the loop and the in-process benchmark. Production and integration tests use `memory.stores`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from agent.consent import StandingApproval
from agent.messages import Message
from agent.ports import ApprovalRecord, ApprovalStatus, Receipt, TurnRecord, UsageRecord


class InMemoryStore:
    def __init__(self) -> None:
        self.sessions: dict[str, dict[str, str]] = {}
        self.messages: dict[str, list[Message]] = {}
        self.turns: dict[str, TurnRecord] = {}
        self.approvals: dict[str, ApprovalRecord] = {}
        self.standing: dict[str, StandingApproval] = {}
        self.usage: list[UsageRecord] = []
        self.decided_by_tap: set[tuple[str, str]] = set()  # taps recorded with their decision

    async def get_or_create_session(self, session_id: str, *, chat_key: str = "", user_id: str = "") -> None:
        self.sessions.setdefault(session_id, {"chat_key": chat_key, "user_id": user_id})
        self.messages.setdefault(session_id, [])

    async def load_messages(self, session_id: str) -> list[Message]:
        return list(self.messages.get(session_id, []))

    async def append_messages(self, session_id: str, messages: list[Message]) -> None:
        self.messages.setdefault(session_id, []).extend(messages)

    async def commit(
        self,
        session_id: str,
        *,
        messages: Sequence[Message] = (),
        turn: TurnRecord | None = None,
        usage: UsageRecord | None = None,
        received: Sequence[Receipt] = (),
    ) -> None:
        await self.get_or_create_session(session_id)
        self.messages[session_id].extend(messages)
        if turn is not None:
            await self.save_turn(turn)
        if usage is not None:
            self.usage.append(usage)

    async def replace_messages(self, session_id: str, messages: list[Message]) -> None:
        self.messages[session_id] = list(messages)

    async def save_turn(self, turn: TurnRecord) -> None:
        self.turns[turn.id] = turn.model_copy(deep=True)

    async def load_turn(self, turn_id: str) -> TurnRecord | None:
        t = self.turns.get(turn_id)
        return t.model_copy(deep=True) if t else None

    async def open_turn(self, session_id: str) -> TurnRecord | None:
        for t in reversed(list(self.turns.values())):
            if t.session_id == session_id and t.status in ("running", "suspended"):
                return t.model_copy(deep=True)
        return None

    async def answer_sent(self, turn_id: str) -> None:
        turn = self.turns.get(turn_id)
        if turn is not None:
            turn.answer = None

    async def unsent_answers(self) -> list[TurnRecord]:
        kept = [t for t in self.turns.values() if t.answer is not None]
        return [t.model_copy(deep=True) for t in sorted(kept, key=lambda t: t.updated_at)]

    async def create_approval(self, approval: ApprovalRecord) -> None:
        self.approvals[approval.id] = approval

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        return self.approvals.get(approval_id)

    async def resolve_approval(
        self,
        approval_id: str,
        *,
        status: ApprovalStatus,
        decided_by: str,
        decision: str,
        receipt: tuple[str, str] | None = None,
    ) -> bool:
        rec = self.approvals.get(approval_id)
        if rec is None or rec.status != "pending" or receipt in self.decided_by_tap:
            return False
        if receipt is not None:
            self.decided_by_tap.add(receipt)
        self.approvals[approval_id] = rec.model_copy(
            update={"status": status, "decided_by": decided_by, "decision": decision}
        )
        return True

    async def add_standing(self, rule: StandingApproval) -> None:
        self.standing[rule.id] = rule

    async def list_standing(
        self, chat_key: str | None, now: datetime, tool: str | None = None
    ) -> list[StandingApproval]:
        return [
            r
            for r in self.standing.values()
            if r.expires_at > now
            and (chat_key is None or r.chat_key == chat_key)
            and (tool is None or r.tool == tool)
        ]

    async def revoke_standing(self, chat_key: str | None, rule_id: str | None) -> int:
        gone = [
            k
            for k, r in self.standing.items()
            if (chat_key is None or r.chat_key == chat_key) and (rule_id is None or k == rule_id)
        ]
        for k in gone:
            del self.standing[k]
        return len(gone)

    async def record_usage(self, record: UsageRecord) -> None:
        self.usage.append(record)
