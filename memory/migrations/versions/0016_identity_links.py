"""identity links: one person's identities on several platforms share one account (its paper book,
portfolio, memory and alerts); the one-time codes that link them (hashed) and the wrong codes tried

Revision ID: 0016_identity_links
Revises: 0015_scheduler_next_runs
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from memory.models import UTCDateTime

revision = "0016_identity_links"
down_revision = "0015_scheduler_next_runs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "identity_links",
        sa.Column("identity", sa.String(160), nullable=False),
        sa.Column("account", sa.String(160), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("linked_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("identity", name="pk_identity_links"),
    )
    op.create_index("ix_identity_links_account", "identity_links", ["account"])
    op.create_table(
        "link_codes",
        sa.Column("code_hash", sa.String(64), nullable=False),
        sa.Column("identity", sa.String(160), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("code_hash", name="pk_link_codes"),
    )
    op.create_index("ix_link_codes_identity", "link_codes", ["identity"])
    op.create_table(
        "link_failures",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("identity", sa.String(160), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_link_failures"),
    )
    op.create_index("ix_link_failures_identity", "link_failures", ["identity"])


def downgrade() -> None:
    op.drop_index("ix_link_failures_identity", table_name="link_failures")
    op.drop_table("link_failures")
    op.drop_index("ix_link_codes_identity", table_name="link_codes")
    op.drop_table("link_codes")
    op.drop_index("ix_identity_links_account", table_name="identity_links")
    op.drop_table("identity_links")
