"""long-term memory: memories (+ FTS5 trigram index), memory_codes, memory_markers, task_states

Revision ID: 0002_memory
Revises: 0001_core
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from memory.models import UTCDateTime

revision = "0002_memory"
down_revision = "0001_core"
branch_labels = None
depends_on = None

BigIntPK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# Kept identical to memory.longterm.SQLITE_FTS_DDL / POSTGRES_SEARCH_DDL (a test compares them).
SQLITE_FTS_DDL = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(content, scope_tag, content='memories', content_rowid='id', tokenize='trigram')",
    "CREATE TRIGGER IF NOT EXISTS memories_ai AFTER INSERT ON memories BEGIN INSERT INTO memories_fts(rowid, content, scope_tag) VALUES (new.id, new.content, new.scope_tag); END",
    "CREATE TRIGGER IF NOT EXISTS memories_ad AFTER DELETE ON memories BEGIN INSERT INTO memories_fts(memories_fts, rowid, content, scope_tag) VALUES ('delete', old.id, old.content, old.scope_tag); END",
    "CREATE TRIGGER IF NOT EXISTS memories_au AFTER UPDATE ON memories BEGIN INSERT INTO memories_fts(memories_fts, rowid, content, scope_tag) VALUES ('delete', old.id, old.content, old.scope_tag); INSERT INTO memories_fts(rowid, content, scope_tag) VALUES (new.id, new.content, new.scope_tag); END",
)
POSTGRES_SEARCH_DDL = (
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    "CREATE INDEX IF NOT EXISTS ix_memories_content_trgm ON memories USING gin (content gin_trgm_ops)",
)


def upgrade() -> None:
    op.create_table(
        "memories",
        sa.Column("id", BigIntPK, autoincrement=True, nullable=False),
        sa.Column("scope", sa.String(128), nullable=False),
        sa.Column("memory_type", sa.String(24), nullable=False),
        sa.Column("level", sa.String(4), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("codes", sa.String(255), nullable=False),
        sa.Column("scope_tag", sa.String(16), nullable=False),
        sa.Column("source_ref", sa.String(255), nullable=False),
        sa.Column("source_kind", sa.String(24), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_memories"),
    )
    op.create_index("ix_memories_scope_type_created", "memories", ["scope", "memory_type", "created_at"])
    op.create_table(
        "memory_codes",
        sa.Column("memory_id", BigIntPK, nullable=False),
        sa.Column("code", sa.String(16), nullable=False),
        sa.Column("scope", sa.String(128), nullable=False),
        sa.ForeignKeyConstraint(
            ["memory_id"], ["memories.id"], name="fk_memory_codes_memory_id_memories", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("memory_id", "code", name="pk_memory_codes"),
    )
    op.create_index("ix_memory_codes_scope_code", "memory_codes", ["scope", "code"])
    op.create_table(
        "memory_markers",
        sa.Column("scope", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("key", sa.String(128), nullable=False),
        sa.Column("value", sa.JSON(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("scope", "kind", "key", name="pk_memory_markers"),
    )
    op.create_table(
        "task_states",
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("data", sa.JSON(), nullable=True),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", name="pk_task_states"),
    )
    dialect = op.get_context().dialect.name
    if dialect == "sqlite":
        for ddl in SQLITE_FTS_DDL:
            op.execute(ddl)
    elif dialect == "postgresql":
        for ddl in POSTGRES_SEARCH_DDL:
            op.execute(ddl)


def downgrade() -> None:
    dialect = op.get_context().dialect.name
    if dialect == "sqlite":
        for name in ("memories_ai", "memories_ad", "memories_au"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS memories_fts")
    elif dialect == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_memories_content_trgm")
    op.drop_table("task_states")
    op.drop_table("memory_markers")
    op.drop_index("ix_memory_codes_scope_code", table_name="memory_codes")
    op.drop_table("memory_codes")
    op.drop_index("ix_memories_scope_type_created", table_name="memories")
    op.drop_table("memories")
