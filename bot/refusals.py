"""Which message tells the chat why an approval decision was refused (by the error's type)."""

from __future__ import annotations

from agent import (
    ApprovalAlreadyDecided,
    ApprovalError,
    ApprovalExpired,
    ApprovalForeignChat,
    ApprovalNotFound,
    NotAnApprover,
)


def refusal_key(refused: ApprovalError, *, group: bool = False, by_id: bool = False) -> str:
    """The i18n key. A non-approver hears who may decide ("only an admin" in a group). A button
    that no longer applies is "stale"; a decision by id (`/approve <id>`) says what is true of that
    id: unknown here, already decided, or expired."""
    if isinstance(refused, NotAnApprover):
        return "approval_admin_only" if group else "approval_not_allowed"
    if not by_id:
        return "approval_stale"
    if isinstance(refused, ApprovalNotFound | ApprovalForeignChat):
        return "approval_unknown_id"
    if isinstance(refused, ApprovalAlreadyDecided):
        return "approval_decided_id"
    if isinstance(refused, ApprovalExpired):
        return "approval_expired_id"
    return "approval_stale"
