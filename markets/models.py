"""Database tables of the investing toolkit (migrations 0003_markets, 0009_paper_book). Everything is
per user. Two separate books: the paper account (simulated trades) and the recorded holdings (the
user's real positions, bookkeeping only); nothing moves between them.

- market_accounts: the paper account's cash per user and market (cn: CNY, crypto: USDT).
- market_positions: the paper account's positions (quantity, average cost incl. buy fees, highest
  close since entry).
- market_holdings / market_holding_cash: recorded real holdings and cash (`update_portfolio`).
- market_trades: every order with its idempotency key (unique), status
  pending → filled | rejected | unknown (→ reconciled to filled | rejected) | waiting (blocked by a
  price limit; → filled | rejected | cancelled at a retry, see markets/broker.py), fees and tax; the
  trading session it belongs to (`trade_date`), the bar that priced it (`price_date`: the last close,
  a retry's open, or for a waiting order the last bar it was blocked on) and, for sells, the realized
  P&L.
- market_strategies / market_traders: NOFXi's strategy templates and the traders running them.
- market_records: analyses, recommendations, screens, backtests and reports (queryable history).
- market_bar_cache: bars fetched from network providers.
- market_alerts / market_alert_triggers / market_watchlist: standing alerts, each firing recorded
  once (migration 0013_market_alerts), and the watchlist they may cover.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Date, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Mapped, declared_attr, mapped_column

from memory.base import Base
from memory.models import UTCDateTime

# What the stores here are given: `async with sessions() as s` opens one database session.
SessionFactory = async_sessionmaker[AsyncSession]


def _now() -> datetime:
    return datetime.now(UTC)


class MarketAccount(Base):
    __tablename__ = "market_accounts"
    __table_args__ = (UniqueConstraint("user_id", "market"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(128), index=True)
    market: Mapped[str] = mapped_column(String(16))
    cash: Mapped[float] = mapped_column(Float, default=0.0)
    currency: Mapped[str] = mapped_column(String(8), default="CNY")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=_now)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=_now, onupdate=_now)


class _Position:
    """The columns a paper position and a recorded holding share (one row per user, market, symbol)."""

    @declared_attr.directive
    def __table_args__(cls) -> tuple[Any, ...]:  # one constraint object per table, not shared
        return (UniqueConstraint("user_id", "market", "symbol"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(128), index=True)
    market: Mapped[str] = mapped_column(String(16))
    symbol: Mapped[str] = mapped_column(String(32))
    name: Mapped[str] = mapped_column(String(64), default="")
    quantity: Mapped[float] = mapped_column(Float, default=0.0)
    avg_cost: Mapped[float] = mapped_column(Float, default=0.0)
    high_since_entry: Mapped[float] = mapped_column(Float, default=0.0)
    opened_on: Mapped[date | None] = mapped_column(Date, nullable=True)
    note: Mapped[str] = mapped_column(Text, default="")
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=_now, onupdate=_now)


class MarketPosition(_Position, Base):
    """A position of the paper account."""

    __tablename__ = "market_positions"


class MarketHolding(_Position, Base):
    """A recorded real holding (bookkeeping; never traded by the paper broker)."""

    __tablename__ = "market_holdings"


class MarketHoldingCash(Base):
    """Recorded real cash per market (bookkeeping)."""

    __tablename__ = "market_holding_cash"
    __table_args__ = (UniqueConstraint("user_id", "market"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(128), index=True)
    market: Mapped[str] = mapped_column(String(16))
    cash: Mapped[float] = mapped_column(Float, default=0.0)
    currency: Mapped[str] = mapped_column(String(8), default="CNY")
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=_now, onupdate=_now)


class MarketTrade(Base):
    __tablename__ = "market_trades"
    __table_args__ = (Index("ix_market_trades_user_created", "user_id", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    idempotency_key: Mapped[str] = mapped_column(String(191), unique=True)
    # sha256 of the order as requested (tool + canonical arguments): a key reused for another
    # order is refused, not replayed; "exec:" + 64 hex for a chat's order. Empty on older rows.
    request_hash: Mapped[str] = mapped_column(String(128), default="")
    user_id: Mapped[str] = mapped_column(String(128), index=True)
    market: Mapped[str] = mapped_column(String(16))
    symbol: Mapped[str] = mapped_column(String(32))
    side: Mapped[str] = mapped_column(String(8))
    quantity: Mapped[float] = mapped_column(Float)
    price: Mapped[float | None] = mapped_column(Float, nullable=True)  # fill price (None until filled)
    fee: Mapped[float] = mapped_column(Float, default=0.0)
    tax: Mapped[float] = mapped_column(Float, default=0.0)
    status: Mapped[str] = mapped_column(String(16), default="pending")  # see the module docstring
    venue: Mapped[str] = mapped_column(String(16), default="paper")  # paper | live:<exchange> | manual
    trade_date: Mapped[date | None] = mapped_column(Date, nullable=True)  # the trading session (T+1)
    price_date: Mapped[date | None] = mapped_column(Date, nullable=True)  # the bar that priced it
    realized_pnl: Mapped[float | None] = mapped_column(Float, nullable=True)  # sells: proceeds - cost
    source: Mapped[str] = mapped_column(String(64), default="chat")  # chat | trader:<id> | manual
    reason: Mapped[str] = mapped_column(Text, default="")
    external_id: Mapped[str] = mapped_column(String(128), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=_now)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=_now, onupdate=_now)


class MarketStrategy(Base):
    __tablename__ = "market_strategies"
    __table_args__ = (UniqueConstraint("user_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(128), index=True)
    name: Mapped[str] = mapped_column(String(128))
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    is_active: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=_now)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=_now, onupdate=_now)


class MarketTrader(Base):
    __tablename__ = "market_traders"
    __table_args__ = (UniqueConstraint("user_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(128), index=True)
    name: Mapped[str] = mapped_column(String(128))
    strategy_id: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("market_strategies.id", ondelete="SET NULL"), nullable=True
    )
    market: Mapped[str] = mapped_column(String(16), default="cn")
    status: Mapped[str] = mapped_column(String(16), default="stopped")  # stopped | running
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    last_run_on: Mapped[date | None] = mapped_column(Date, nullable=True)
    last_result: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=_now)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=_now, onupdate=_now)


class MarketRecord(Base):
    __tablename__ = "market_records"
    __table_args__ = (Index("ix_market_records_user_kind", "user_id", "kind", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(32))  # analysis | recommendation | screen | backtest | report
    symbol: Mapped[str] = mapped_column(String(32), default="", index=True)
    summary: Mapped[str] = mapped_column(Text, default="")
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    as_of: Mapped[date | None] = mapped_column(Date, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=_now)


class MarketBarCache(Base):
    __tablename__ = "market_bar_cache"

    source: Mapped[str] = mapped_column(String(32), primary_key=True)
    symbol: Mapped[str] = mapped_column(String(32), primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    open: Mapped[float] = mapped_column(Float)
    high: Mapped[float] = mapped_column(Float)
    low: Mapped[float] = mapped_column(Float)
    close: Mapped[float] = mapped_column(Float)
    volume: Mapped[float] = mapped_column(Float)
    amount: Mapped[float | None] = mapped_column(Float, nullable=True)
    adjust: Mapped[str] = mapped_column(String(8), default="none")
    fetched_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=_now)


class MarketAlert(Base):
    """A standing condition on a symbol or the user's watchlist (markets/alerts.py); delivered into
    `chat_key`. `baseline` is the newest bar when it was set: only later bars can trigger it."""

    __tablename__ = "market_alerts"
    __table_args__ = (Index("ix_market_alerts_status_market", "status", "market"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(128), index=True)
    chat_key: Mapped[str] = mapped_column(String(255))
    symbol: Mapped[str] = mapped_column(String(32), default="")  # "" for the watchlist
    market: Mapped[str] = mapped_column(String(16), default="cn")
    kind: Mapped[str] = mapped_column(String(24))
    value: Mapped[float] = mapped_column(Float, default=0.0)
    event: Mapped[str] = mapped_column(String(16), default="")
    baseline: Mapped[date | None] = mapped_column(Date, nullable=True)
    status: Mapped[str] = mapped_column(String(16), default="active")  # active | done | removed
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=_now)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=_now, onupdate=_now)


class MarketAlertTrigger(Base):
    """One firing of an alert on one symbol's bar: unique, so it is recorded (and delivered) once
    whatever process or retry evaluates it. pending → sending → delivered | failed."""

    __tablename__ = "market_alert_triggers"
    __table_args__ = (
        UniqueConstraint("alert_id", "symbol", "bar_date"),
        Index("ix_market_alert_triggers_status", "status", "chat_key"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    alert_id: Mapped[int] = mapped_column(Integer, ForeignKey("market_alerts.id", ondelete="CASCADE"))
    chat_key: Mapped[str] = mapped_column(String(255))
    symbol: Mapped[str] = mapped_column(String(32))
    bar_date: Mapped[date] = mapped_column(Date)
    observed: Mapped[float] = mapped_column(Float, default=0.0)  # the close, % move, RSI or event price
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=_now)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class MarketWatch(Base):
    """A symbol on the user's watchlist (alerts may watch the whole list)."""

    __tablename__ = "market_watchlist"
    __table_args__ = (UniqueConstraint("user_id", "symbol"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(128), index=True)
    symbol: Mapped[str] = mapped_column(String(32))
    market: Mapped[str] = mapped_column(String(16), default="cn")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=_now)
