"""the paper book apart from recorded holdings; realized P&L and the session date of paper trades

Recorded real holdings (`update_portfolio`) move out of `market_positions` — which is now the paper
account only — into `market_holdings`, and recorded cash into `market_holding_cash`. A position row
with no filled paper trade of the same user and symbol was recorded, not traded, and is moved. (Cash
set by hand before this migration overwrote the paper cash and cannot be told apart; it stays.)
`market_trades` gains `price_date` (the bar whose close priced a paper fill; `trade_date` is now the
wall-clock trading session) and `realized_pnl` (sells).

Revision ID: 0009_paper_book
Revises: 0006_received_messages
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from memory.models import UTCDateTime

revision = "0009_paper_book"
down_revision = "0007_standing_approvals"
branch_labels = None
depends_on = None

_RECORDED = (
    "FROM market_positions p WHERE NOT EXISTS (SELECT 1 FROM market_trades t WHERE t.user_id = p.user_id "
    "AND t.symbol = p.symbol AND t.status = 'filled' AND t.venue = 'paper')"
)


def upgrade() -> None:
    op.create_table(
        "market_holdings",
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
        sa.PrimaryKeyConstraint("id", name="pk_market_holdings"),
        sa.UniqueConstraint("user_id", "market", "symbol", name="uq_market_holdings_user_id"),
    )
    op.create_index("ix_market_holdings_user_id", "market_holdings", ["user_id"])
    op.create_table(
        "market_holding_cash",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("market", sa.String(16), nullable=False),
        sa.Column("cash", sa.Float(), nullable=False),
        sa.Column("currency", sa.String(8), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_market_holding_cash"),
        sa.UniqueConstraint("user_id", "market", name="uq_market_holding_cash_user_id"),
    )
    op.create_index("ix_market_holding_cash_user_id", "market_holding_cash", ["user_id"])
    op.add_column("market_trades", sa.Column("price_date", sa.Date(), nullable=True))
    op.add_column("market_trades", sa.Column("realized_pnl", sa.Float(), nullable=True))
    op.execute(
        "INSERT INTO market_holdings (user_id, market, symbol, name, quantity, avg_cost, high_since_entry, "
        "opened_on, note, updated_at) SELECT p.user_id, p.market, p.symbol, p.name, p.quantity, p.avg_cost, "
        "p.high_since_entry, p.opened_on, p.note, p.updated_at " + _RECORDED
    )
    op.execute("DELETE FROM market_positions WHERE id IN (SELECT p.id " + _RECORDED + ")")


def downgrade() -> None:
    op.execute(
        "INSERT INTO market_positions (user_id, market, symbol, name, quantity, avg_cost, high_since_entry, "
        "opened_on, note, updated_at) SELECT h.user_id, h.market, h.symbol, h.name, h.quantity, h.avg_cost, "
        "h.high_since_entry, h.opened_on, h.note, h.updated_at FROM market_holdings h WHERE NOT EXISTS "
        "(SELECT 1 FROM market_positions p WHERE p.user_id = h.user_id AND p.market = h.market "
        "AND p.symbol = h.symbol)"
    )
    with op.batch_alter_table("market_trades") as batch:
        batch.drop_column("realized_pnl")
        batch.drop_column("price_date")
    op.drop_index("ix_market_holding_cash_user_id", table_name="market_holding_cash")
    op.drop_table("market_holding_cash")
    op.drop_index("ix_market_holdings_user_id", table_name="market_holdings")
    op.drop_table("market_holdings")
