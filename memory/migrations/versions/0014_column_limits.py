"""column lengths that hold what the code writes

PostgreSQL refuses a value longer than its column (SQLite ignores lengths), and these were too
short: `market_trades.request_hash` holds "exec:" and 64 hex characters (69), which failed every
approved trade; a session id is its chat key and a suffix, up to ~90 characters for a user in a
Discord thread or a Telegram topic, in 64-character columns. Call ids and model names come from the
provider or the configuration, and a memory's codes from its text: their columns lose their limit.

On SQLite each table is copied (batch mode); foreign keys are off while the migrations run
(memory/db.py), so copying `sessions` does not delete its messages.

Revision ID: 0014_column_limits
Revises: 0013_market_alerts
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_column_limits"
down_revision = "0013_market_alerts"
branch_labels = None
depends_on = None

SESSION_ID_OLD, SESSION_ID_NEW = sa.String(64), sa.String(255)

# (table, column, old type, new type, nullable)
CHANGES: tuple[tuple[str, str, sa.types.TypeEngine[str], sa.types.TypeEngine[str], bool], ...] = (
    ("sessions", "id", SESSION_ID_OLD, SESSION_ID_NEW, False),
    ("sessions", "model", sa.String(64), sa.Text(), False),
    ("messages", "session_id", SESSION_ID_OLD, SESSION_ID_NEW, False),
    ("turns", "session_id", SESSION_ID_OLD, SESSION_ID_NEW, False),
    ("approvals", "session_id", SESSION_ID_OLD, SESSION_ID_NEW, False),
    ("approvals", "call_id", sa.String(128), sa.Text(), False),
    ("usage", "session_id", SESSION_ID_OLD, SESSION_ID_NEW, False),
    ("usage", "model", sa.String(128), sa.Text(), False),
    ("task_states", "session_id", SESSION_ID_OLD, SESSION_ID_NEW, False),
    ("chats", "model", sa.String(128), sa.Text(), True),
    ("background_tasks", "call_id", sa.String(128), sa.Text(), False),
    ("market_trades", "request_hash", sa.String(64), sa.String(128), False),
    ("memories", "codes", sa.String(255), sa.Text(), False),
)


# As migration 0002_memory created them (the rows' ids and content are copied unchanged, so the
# index itself stays valid).
FTS_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS memories_ai AFTER INSERT ON memories BEGIN INSERT INTO memories_fts(rowid, content, scope_tag) VALUES (new.id, new.content, new.scope_tag); END",
    "CREATE TRIGGER IF NOT EXISTS memories_ad AFTER DELETE ON memories BEGIN INSERT INTO memories_fts(memories_fts, rowid, content, scope_tag) VALUES ('delete', old.id, old.content, old.scope_tag); END",
    "CREATE TRIGGER IF NOT EXISTS memories_au AFTER UPDATE ON memories BEGIN INSERT INTO memories_fts(memories_fts, rowid, content, scope_tag) VALUES ('delete', old.id, old.content, old.scope_tag); INSERT INTO memories_fts(rowid, content, scope_tag) VALUES (new.id, new.content, new.scope_tag); END",
)


def _alter(new: bool) -> None:
    tables = dict.fromkeys(t for t, *_ in CHANGES)
    for table in tables:
        with op.batch_alter_table(table) as batch:
            for t, name, old_type, new_type, nullable in CHANGES:
                if t == table:
                    batch.alter_column(
                        name,
                        existing_type=old_type if new else new_type,
                        type_=new_type if new else old_type,
                        existing_nullable=nullable,
                    )
    if op.get_bind().dialect.name == "sqlite":
        # copying `memories` dropped the triggers that keep its full-text index in step
        for ddl in FTS_TRIGGERS:
            op.execute(ddl)


def upgrade() -> None:
    _alter(new=True)


def downgrade() -> None:
    # fails on PostgreSQL if a longer value has been written since: nothing is cut
    _alter(new=False)
