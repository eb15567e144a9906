"""Approval policy, wrapped around tool execution instead of branching inside the loop.

An approval is a record bound to one exact action (session, turn, call id, tool, canonical
arguments and their hash, requester, approvers, expiry). A call that needs one suspends the turn;
only an allowed human resolves it, by an atomic compare-and-set from `pending`. Without a human
present (scheduled jobs, `tapebot chat -m`) approval-requiring tools are denied: fail closed.

A standing approval ("Always allow", agent/consent.py) lets a later call run without a card only
when its scope covers the exact call, it has not expired, the requester is an approver (in a group:
an admin), and — for trades — live trading is off.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from agent.consent import StandingApproval, StandingScope, standing_scope
from agent.errors import (
    AlwaysNotOffered,
    ApprovalAlreadyDecided,
    ApprovalExpired,
    ApprovalNotFound,
    NotAnApprover,
    ToolDenied,
)
from agent.messages import ToolCallPart
from agent.ports import (
    ApprovalRecord,
    ApprovalStatus,
    ApprovalStore,
    Clock,
    Receipt,
    SystemClock,
    TurnRecord,
    WaitingState,
    WaitingTarget,
    args_hash,
)
from agent.tools.registry import ToolSpec

Decision = Literal["once", "always", "deny", "edit"]
DEFAULT_APPROVAL_TTL = timedelta(minutes=30)
DEFAULT_STANDING_TTL = timedelta(hours=24)


class Suspend(Exception):
    """The call cannot complete now: the turn suspends in `waiting` until a human answers."""

    def __init__(self, waiting: WaitingState, approval: ApprovalRecord | None = None):
        super().__init__(waiting.question)
        self.waiting = waiting
        self.approval = approval


@dataclass(frozen=True, slots=True)
class Requester:
    """Who started the turn and who may approve its actions."""

    user_id: str = ""
    chat_key: str = ""
    approvers: tuple[str, ...] = ()
    unattended: bool = False
    # whose paper book, portfolio, memory and alerts the turn uses: a group's own, or the account
    # the user linked; "" means the user's own (found by the runtime when it begins the turn)
    account: str = ""


def standing_keys(chat_key: str, account: str) -> tuple[str, ...]:
    """Where a chat's standing approvals are kept: under the chat, and — for a user who linked
    identities (not a group's own account) — under the account, shared by its linked chats."""
    if account and not account.startswith("group:"):
        return (f"account:{account}", chat_key)
    return (chat_key,)


def new_approval_id() -> str:
    # 12 url-safe chars: unguessable, and far below Telegram's 64-byte callback_data limit.
    return secrets.token_urlsafe(9)


def new_rule_id() -> str:
    # short enough to type in `/rules revoke <id>`
    return "r" + secrets.token_hex(3)


class ApprovalGate:
    def __init__(
        self,
        store: ApprovalStore,
        clock: Clock | None = None,
        ttl: timedelta = DEFAULT_APPROVAL_TTL,
        *,
        standing_ttl: timedelta = DEFAULT_STANDING_TTL,
        live_trading: Callable[[], bool] = lambda: False,
    ):
        self.store = store
        self.clock = clock or SystemClock()
        self.ttl = ttl
        self.standing_ttl = min(standing_ttl, DEFAULT_STANDING_TTL)  # never longer than a day
        self.live_trading = live_trading

    def scope_for(self, record: ApprovalRecord) -> StandingScope | None:
        """What "Always allow" would cover for this approval; None when it is not offered."""
        return standing_scope(record.tool, record.arguments, live_trading=self.live_trading())

    async def _standing_rule(self, call: ToolCallPart, who: Requester) -> StandingApproval | None:
        """The chat's standing approval that covers `call`, if any."""
        # In a group only an admin's request is covered; a member's still needs an admin.
        if not who.chat_key or not who.user_id or who.user_id not in who.approvers:
            return None
        if standing_scope(call.name, call.arguments, live_trading=self.live_trading()) is None:
            return None  # not offered for this tool now (exec_command; trades while live)
        now = self.clock.now()
        for key in standing_keys(who.chat_key, who.account):
            rules = await self.store.list_standing(key, now, call.name)
            found = next((r for r in rules if r.scope.covers(call.name, call.arguments)), None)
            if found is not None:
                return found
        return None

    async def check(
        self, spec: ToolSpec, call: ToolCallPart, turn: TurnRecord, who: Requester
    ) -> StandingApproval | None:
        """Return if the call may run now — with the standing approval that allowed it, if one
        did — or raise ToolDenied or Suspend."""
        if not spec.requires_approval:
            return None
        if who.unattended:
            raise ToolDenied(
                f"{spec.name} needs a human's approval and nobody is present to give it; it was not run. "
                "Tell the user what you would do so they can ask for it in chat."
            )
        digest = args_hash(call.name, call.arguments)
        existing_id = turn.calls_approval.get(call.id)
        if existing_id:  # resumed after its card: that decision is the one the chat saw
            record = await self.store.get_approval(existing_id)
            if record and record.status == "approved" and record.args_hash == digest:
                return None
        rule = await self._standing_rule(call, who)
        if rule is not None:
            return rule
        now = self.clock.now()
        record = ApprovalRecord(
            id=new_approval_id(),
            session_id=turn.session_id,
            turn_id=turn.id,
            call_id=call.id,
            tool=call.name,
            arguments=call.arguments or {},
            args_hash=digest,
            requester=who.user_id,
            approvers=list(who.approvers or ((who.user_id,) if who.user_id else ())),
            chat_key=who.chat_key,
            created_at=now,
            expires_at=now + self.ttl,
        )
        await self.store.create_approval(record)
        waiting = WaitingState(
            kind="approval",
            question=f"Allow {call.name}?",
            intent=call.name,
            # no options: an approval is answered through agent/consent.py, never by an option
            # number or label ("3" once ran the action, reading the third option as a choice)
            options=[],
            confirmation_target=WaitingTarget(call_id=call.id, tool=call.name, approval_id=record.id),
            created_at=now,
            expires_at=record.expires_at,
        )
        raise Suspend(waiting, record)

    async def _standing_key(self, record: ApprovalRecord) -> str:
        """The first of `standing_keys` for the turn the approval belongs to (its account)."""
        load_turn = getattr(self.store, "load_turn", None)  # the session store, when it is one
        turn = await load_turn(record.turn_id) if load_turn is not None else None
        account = getattr(turn, "account", "") or ""
        return standing_keys(record.chat_key, str(account))[0]

    async def decide(
        self, approval_id: str, user_id: str, decision: Decision, receipt: Receipt | None = None
    ) -> ApprovalRecord:
        """Resolve a pending approval. Raises ApprovalError for unknown ids, non-approvers,
        expired or already-decided records; nothing executes in those cases. `receipt`: the tap
        that decided it, stored as processed in the decision's own transaction."""
        record = await self.store.get_approval(approval_id)
        if record is None:
            raise ApprovalNotFound()
        if record.approvers and user_id not in record.approvers:
            raise NotAnApprover()
        if record.status == "expired":  # expired earlier (sweep, restart): the card still closes
            raise ApprovalExpired("this approval was already expired")
        if record.status != "pending":
            raise ApprovalAlreadyDecided(record.status)
        now = self.clock.now()
        if record.expires_at and now >= record.expires_at:
            await self.store.resolve_approval(
                approval_id, status="expired", decided_by="", decision="expired"
            )
            raise ApprovalExpired()
        scope = self.scope_for(record) if decision == "always" else None
        if decision == "always" and (scope is None or not record.chat_key):
            raise AlwaysNotOffered()
        status: ApprovalStatus = "approved" if decision in ("once", "always") else "denied"
        if not await self.store.resolve_approval(
            approval_id, status=status, decided_by=user_id, decision=decision, receipt=receipt
        ):
            raise ApprovalAlreadyDecided()
        if scope is not None:
            await self.store.add_standing(
                StandingApproval(
                    id=new_rule_id(),
                    chat_key=await self._standing_key(record),
                    scope=scope,
                    granted_by=user_id,
                    created_at=now,
                    expires_at=now + self.standing_ttl,
                    approval_id=record.id,
                )
            )
        return record.model_copy(update={"status": status, "decided_by": user_id, "decision": decision})
