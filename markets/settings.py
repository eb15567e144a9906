"""Market settings: a `[markets]` table of config.toml maps onto `MarketSettings`.

A module of its own (re-exported by markets.services) so the broker and the portfolio can read the
settings without importing the services module, which builds the live broker (that import cycle
broker → services → broker is what this module removes).
"""

from __future__ import annotations

from pydantic import BaseModel


class MarketSettings(BaseModel):
    """Market-related settings (a `[markets]` table of config.toml maps onto this)."""

    initial_cash_cn: float = 1_000_000.0  # a new paper account's cash (CNY)
    initial_cash_crypto: float = 100_000.0  # USDT
    crypto_fee: float = 0.001
    commission: float = 0.00025
    commission_min: float = 5.0
    stamp_duty_sell: float = 0.0005
    retry_blocked: bool = True  # a paper order blocked by a price limit waits for the next bar's open
    live: bool = False  # live trading through ccxt: never on unless set explicitly
    live_exchange: str = "binance"
    live_api_key: str = ""
    live_secret: str = ""
    csv_folder: str = ""
    providers: list[str] = ["bundled"]  # order of providers: bundled, csv, akshare, yfinance, ccxt
    alert_poll_s: float = 60.0  # the intraday alert poll's interval in trading hours (0: off)
    data_dir: str = ""  # $TAPEBOT_HOME/data: a cn_trade_calendar.json there overrides the bundled one
