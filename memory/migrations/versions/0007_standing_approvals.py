"""standing approvals: scoped, expiring, revocable "Always allow" records

Replaces the unscoped `approval_rules` ("always allow this tool in this chat"): those rows are
deleted, so a rule granted before this version stops applying and the user is asked again.

Revision ID: 0007_standing_approvals
Revises: 0006_received_messages
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from memory.models import UTCDateTime

revision = "0007_standing_approvals"
down_revision = "0006_received_messages"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "standing_approvals",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("chat_key", sa.String(255), nullable=False),
        sa.Column("tool", sa.String(128), nullable=False),
        sa.Column("scope", sa.JSON(), nullable=False),
        sa.Column("granted_by", sa.String(64), nullable=False),
        sa.Column("approval_id", sa.String(64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_standing_approvals"),
    )
    op.create_index("ix_standing_approvals_chat_key", "standing_approvals", ["chat_key"])
    op.execute("DELETE FROM approval_rules")


def downgrade() -> None:
    op.drop_index("ix_standing_approvals_chat_key", "standing_approvals")
    op.drop_table("standing_approvals")
