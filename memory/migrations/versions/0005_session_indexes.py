"""indexes for long sessions: a chat's open turn found by one index seek; no duplicate index on
messages

The open-turn lookup (every message) read all of a session's turns and sorted them: linear in
the length of the chat. `ix_turns_session_open` (session_id, status, updated_at) answers it with one
seek, and covers every lookup by session that `ix_turns_session_id` served. `ix_messages_session_id`
duplicated the unique (session_id, seq) index that every history read already uses, and cost each
inserted message one more index update.

Revision ID: 0005_session_indexes
Revises: 0004_tasks_scheduler
"""

from __future__ import annotations

from alembic import op

revision = "0005_session_indexes"
down_revision = "0004_tasks_scheduler"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_turns_session_open", "turns", ["session_id", "status", "updated_at"])
    op.drop_index("ix_turns_session_id", table_name="turns")
    op.drop_index("ix_messages_session_id", table_name="messages")


def downgrade() -> None:
    op.create_index("ix_messages_session_id", "messages", ["session_id"])
    op.create_index("ix_turns_session_id", "turns", ["session_id"])
    op.drop_index("ix_turns_session_open", table_name="turns")
