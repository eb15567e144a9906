"""market alerts: standing conditions on prices, indicators and Wyckoff events, their firings
(unique per alert, symbol and bar: delivered once) and the watchlist they may cover

Revision ID: 0013_market_alerts
Revises: 0012_chat_tables
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from memory.models import UTCDateTime

revision = "0013_market_alerts"
down_revision = "0012_chat_tables"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "market_alerts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("chat_key", sa.String(255), nullable=False),
        sa.Column("symbol", sa.String(32), nullable=False),
        sa.Column("market", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(24), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("event", sa.String(16), nullable=False),
        sa.Column("baseline", sa.Date(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_market_alerts"),
    )
    op.create_index("ix_market_alerts_user_id", "market_alerts", ["user_id"])
    op.create_index("ix_market_alerts_status_market", "market_alerts", ["status", "market"])
    op.create_table(
        "market_alert_triggers",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("alert_id", sa.Integer(), nullable=False),
        sa.Column("chat_key", sa.String(255), nullable=False),
        sa.Column("symbol", sa.String(32), nullable=False),
        sa.Column("bar_date", sa.Date(), nullable=False),
        sa.Column("observed", sa.Float(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("delivered_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["alert_id"], ["market_alerts.id"], name="fk_market_alert_triggers_alert_id_market_alerts",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_market_alert_triggers"),
        sa.UniqueConstraint("alert_id", "symbol", "bar_date", name="uq_market_alert_triggers_alert_id"),
    )  # fmt: skip
    op.create_index("ix_market_alert_triggers_status", "market_alert_triggers", ["status", "chat_key"])
    op.create_table(
        "market_watchlist",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("symbol", sa.String(32), nullable=False),
        sa.Column("market", sa.String(16), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_market_watchlist"),
        sa.UniqueConstraint("user_id", "symbol", name="uq_market_watchlist_user_id"),
    )
    op.create_index("ix_market_watchlist_user_id", "market_watchlist", ["user_id"])


def downgrade() -> None:
    op.drop_table("market_watchlist")
    op.drop_table("market_alert_triggers")
    op.drop_table("market_alerts")
