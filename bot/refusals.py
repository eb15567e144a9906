"""Which message tells the chat why an approval decision was refused (by the error's type)."""

from __future__ import annotations

from agent.errors import ApprovalError, NotAnApprover


def refusal_key(refused: ApprovalError) -> str:
    """The i18n key: "not allowed" for a non-approver, "stale" for everything else (expired,
    decided, foreign chat, unknown id) — those all mean the card no longer applies."""
    return "approval_not_allowed" if isinstance(refused, NotAnApprover) else "approval_stale"
