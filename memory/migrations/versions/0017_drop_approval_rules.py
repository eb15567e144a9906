"""drop approval_rules

The unscoped "always allow this tool in this chat" rules were replaced by standing approvals
(0007_standing_approvals deleted their rows); nothing has read or written the table since.

Revision ID: 0017_drop_approval_rules
Revises: 0016_identity_links
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from memory.models import UTCDateTime

revision = "0017_drop_approval_rules"
down_revision = "0016_identity_links"
branch_labels = None
depends_on = None

BigIntPK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.drop_table("approval_rules")


def downgrade() -> None:
    op.create_table(
        "approval_rules",
        sa.Column("id", BigIntPK, autoincrement=True, nullable=False),
        sa.Column("chat_key", sa.String(255), nullable=False),
        sa.Column("tool", sa.String(128), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_approval_rules"),
        sa.UniqueConstraint("chat_key", "tool", name="uq_approval_rules_chat_key"),
    )
