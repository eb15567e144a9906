"""`SqlStore`: every SQL store in one object, for the composition root (`bot/app.py`).

Each storage port has a store of its own — `SqlSessionStore` (sessions, messages, the per-step
commit), `SqlTurnStore`, `SqlApprovalStore` (approvals and standing approvals), `SqlUsageStore`,
`SqlInbox` (received updates), `SqlKV`, and `ChatTables` (chats, paired users, sent-message
references) — usable alone on a `Database`. This facade adds nothing to them: the runtime takes
one `RuntimeStore` (four of those ports at once) and the bot's parts reach the others through
the same object, so one instance shares the database, the masking of secrets and the history
cache between them.

Every method is one short transaction. Inserts that may race use the dialect's
`ON CONFLICT DO NOTHING / DO UPDATE` (SQLite and PostgreSQL both have it), so "create if absent"
and "seen before?" are single atomic statements rather than check-then-act.
"""

from __future__ import annotations

from memory.approval_store import SqlApprovalStore
from memory.chat_tables import ChatTables
from memory.inbox_store import SqlInbox
from memory.kv_store import SqlKV
from memory.session_store import SessionInfo, SqlSessionStore, _HistoryCache
from memory.turn_store import SqlTurnStore
from memory.usage_store import SqlUsageStore, UsageTotal

__all__ = ["SessionInfo", "SqlStore", "UsageTotal", "_HistoryCache"]


class SqlStore(SqlSessionStore, SqlTurnStore, SqlApprovalStore, SqlUsageStore, SqlInbox, SqlKV, ChatTables):
    """Implements agent.ports.SessionStore, TurnStore, ApprovalStore and UsageStore (the runtime's
    `RuntimeStore`), the inbox, the key-value corner and the chat tables."""
