"""a chat turn's answer is kept with the turn until it has been sent

`turns.answer` holds a chat turn's final answer from the transaction that completes the turn until
the chat has been sent it; a partial index finds the few still unsent after a crash.

Revision ID: 0019_unsent_answers
Revises: 0018_replica_inbox
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_unsent_answers"
down_revision = "0018_replica_inbox"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("turns") as batch:
        batch.add_column(sa.Column("answer", sa.Text(), nullable=True))
    op.create_index(
        "ix_turns_unsent",
        "turns",
        ["updated_at"],
        sqlite_where=sa.text("answer IS NOT NULL"),
        postgresql_where=sa.text("answer IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_turns_unsent", table_name="turns")
    with op.batch_alter_table("turns") as batch:
        batch.drop_column("answer")
