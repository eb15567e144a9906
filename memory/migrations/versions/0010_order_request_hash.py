"""the order an idempotency key was first used for

`market_trades.request_hash` is the sha256 of the order as requested (tool and canonical
arguments). A key reused for a different order (an MCP client's reused `idempotency_key`) is then
refused with the first order named, instead of silently replaying the earlier result.

Revision ID: 0010_order_request_hash
Revises: 0009_paper_book
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_order_request_hash"
down_revision = "0009_paper_book"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "market_trades", sa.Column("request_hash", sa.String(64), nullable=False, server_default="")
    )


def downgrade() -> None:
    with op.batch_alter_table("market_trades") as batch:
        batch.drop_column("request_hash")
