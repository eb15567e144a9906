"""investing toolkit: accounts, positions, trades, strategies, traders, records, bar cache

Revision ID: 0003_markets
Revises: 0002_memory
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from memory.models import UTCDateTime

revision = "0003_markets"
down_revision = "0002_memory"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "market_accounts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("market", sa.String(16), nullable=False),
        sa.Column("cash", sa.Float(), nullable=False),
        sa.Column("currency", sa.String(8), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_market_accounts"),
        sa.UniqueConstraint("user_id", "market", name="uq_market_accounts_user_id"),
    )
    op.create_index("ix_market_accounts_user_id", "market_accounts", ["user_id"])

    op.create_table(
        "market_positions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("market", sa.String(16), nullable=False),
        sa.Column("symbol", sa.String(32), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("quantity", sa.Float(), nullable=False),
        sa.Column("avg_cost", sa.Float(), nullable=False),
        sa.Column("high_since_entry", sa.Float(), nullable=False),
        sa.Column("opened_on", sa.Date(), nullable=True),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_market_positions"),
        sa.UniqueConstraint("user_id", "market", "symbol", name="uq_market_positions_user_id"),
    )
    op.create_index("ix_market_positions_user_id", "market_positions", ["user_id"])

    op.create_table(
        "market_trades",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("idempotency_key", sa.String(191), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("market", sa.String(16), nullable=False),
        sa.Column("symbol", sa.String(32), nullable=False),
        sa.Column("side", sa.String(8), nullable=False),
        sa.Column("quantity", sa.Float(), nullable=False),
        sa.Column("price", sa.Float(), nullable=True),
        sa.Column("fee", sa.Float(), nullable=False),
        sa.Column("tax", sa.Float(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("venue", sa.String(16), nullable=False),
        sa.Column("trade_date", sa.Date(), nullable=True),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("external_id", sa.String(128), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_market_trades"),
        sa.UniqueConstraint("idempotency_key", name="uq_market_trades_idempotency_key"),
    )
    op.create_index("ix_market_trades_user_id", "market_trades", ["user_id"])
    op.create_index("ix_market_trades_user_created", "market_trades", ["user_id", "created_at"])

    op.create_table(
        "market_strategies",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("is_active", sa.Boolean(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_market_strategies"),
        sa.UniqueConstraint("user_id", "name", name="uq_market_strategies_user_id"),
    )
    op.create_index("ix_market_strategies_user_id", "market_strategies", ["user_id"])

    op.create_table(
        "market_traders",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("strategy_id", sa.Integer(), nullable=True),
        sa.Column("market", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("last_run_on", sa.Date(), nullable=True),
        sa.Column("last_result", sa.Text(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_market_traders"),
        sa.ForeignKeyConstraint(
            ["strategy_id"],
            ["market_strategies.id"],
            name="fk_market_traders_strategy_id_market_strategies",
            ondelete="SET NULL",
        ),
        sa.UniqueConstraint("user_id", "name", name="uq_market_traders_user_id"),
    )
    op.create_index("ix_market_traders_user_id", "market_traders", ["user_id"])

    op.create_table(
        "market_records",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("symbol", sa.String(32), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("as_of", sa.Date(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_market_records"),
    )
    op.create_index("ix_market_records_symbol", "market_records", ["symbol"])
    op.create_index("ix_market_records_user_kind", "market_records", ["user_id", "kind", "created_at"])

    op.create_table(
        "market_bar_cache",
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("symbol", sa.String(32), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("open", sa.Float(), nullable=False),
        sa.Column("high", sa.Float(), nullable=False),
        sa.Column("low", sa.Float(), nullable=False),
        sa.Column("close", sa.Float(), nullable=False),
        sa.Column("volume", sa.Float(), nullable=False),
        sa.Column("amount", sa.Float(), nullable=True),
        sa.Column("adjust", sa.String(8), nullable=False),
        sa.Column("fetched_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("source", "symbol", "day", name="pk_market_bar_cache"),
    )


def downgrade() -> None:
    for table in (
        "market_bar_cache",
        "market_records",
        "market_traders",
        "market_strategies",
        "market_trades",
        "market_positions",
        "market_accounts",
    ):
        op.drop_table(table)
