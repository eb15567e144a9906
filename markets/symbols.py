"""Instruments, code forms and boards.

A-share codes are 6-digit strings. Accepted input forms: `600519`, `600519.SH`, `600519.SS`
(Yahoo), `sh600519`, `SH600519`, `sh.600519` (baostock). Crypto symbols: `BTC/USDT`, `BTCUSDT`,
`BTC-USDT`, `BTC-USD`, `BTC`. The board decides the daily price limit:

| board | codes | limit |
|---|---|---|
| SH main | 600/601/603/605 | ±10 % |
| SZ main | 000/001/002/003 | ±10 % |
| ChiNext | 300/301/302 | ±20 % |
| STAR | 688/689 | ±20 % |
| BJ | 43x/83x/87x/92x | ±30 % |
| ST (any board, name starts with ST/*ST) | | ±5 % (main boards) |
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Market = Literal["cn", "crypto", "index"]
Board = Literal["main", "chinext", "star", "bj", "crypto", "index"]

_SUFFIX = re.compile(r"^(\d{6})\.(SH|SS|SZ|BJ)$", re.I)
_PREFIX = re.compile(r"^(SH|SZ|BJ)\.?(\d{6})$", re.I)
_CRYPTO = re.compile(r"^([A-Z0-9]{2,10})[/\-_]?(USDT|USDC|USD|BUSD|BTC)?$", re.I)


@dataclass(frozen=True, slots=True)
class Instrument:
    """One tradable thing. `symbol` is canonical: 6 digits for A-shares, `BASE/QUOTE` for crypto."""

    symbol: str
    name: str = ""
    market: Market = "cn"
    exchange: str = ""  # SH / SZ / BJ / BINANCE / CSI
    board: Board = "main"
    industry: str = ""
    area: str = ""
    initials: str = ""  # pinyin initials of the name (GZMT)
    is_st: bool = False

    @property
    def ts_code(self) -> str:
        return f"{self.symbol}.{self.exchange}" if self.market == "cn" else self.symbol

    @property
    def label(self) -> str:
        return f"{self.name}({self.symbol})" if self.name else self.symbol

    @property
    def limit_pct(self) -> float | None:
        return limit_pct(self.board, self.is_st) if self.market == "cn" else None


def exchange_of(code: str) -> str:
    if code.startswith(("60", "68", "90")):
        return "SH"
    if code.startswith(("43", "83", "87", "88", "92")):
        return "BJ"
    return "SZ"


def board_of(code: str) -> Board:
    if code.startswith(("300", "301", "302")):
        return "chinext"
    if code.startswith(("688", "689")):
        return "star"
    if exchange_of(code) == "BJ":
        return "bj"
    return "main"


def limit_pct(board: Board, is_st: bool = False) -> float | None:
    """Daily price limit as a fraction (0.10 = ±10 %). None for markets without limits."""
    if board in ("crypto", "index"):
        return None
    if is_st and board == "main":
        return 0.05
    return {"main": 0.10, "chinext": 0.20, "star": 0.20, "bj": 0.30}[board]


def is_st_name(name: str) -> bool:
    return name.upper().lstrip("*").startswith("ST")


def parse_cn_code(text: str) -> tuple[str, str | None] | None:
    """`(code, exchange)` for any accepted A-share form; the exchange is None for a bare code and
    `SH` for Yahoo's `.SS`. None when the text is not a code."""
    t = text.strip().replace(" ", "")
    if re.fullmatch(r"\d{6}", t):
        return t, None
    m = _SUFFIX.match(t)
    if m:
        x = m.group(2).upper()
        return m.group(1), "SH" if x == "SS" else x
    m = _PREFIX.match(t)
    if m:
        return m.group(2), m.group(1).upper()
    return None


def normalize_cn_code(text: str) -> str | None:
    """Return the 6-digit code for any accepted A-share form, or None."""
    parsed = parse_cn_code(text)
    return parsed[0] if parsed else None


def normalize_crypto(text: str) -> str | None:
    """`btc`, `BTCUSDT`, `btc-usd`, `BTC/USDT` → `BTC/USDT` (USD is read as USDT, the dataset's quote)."""
    t = text.strip().upper()
    if not t or t.isdigit():
        return None
    m = _CRYPTO.match(t)
    if not m:
        return None
    base, quote = m.group(1), m.group(2) or "USDT"
    if quote == "USD":
        quote = "USDT"
    if base.endswith("USDT") and len(base) > 4:  # "BTCUSDT" matched greedily as base
        base = base[:-4]
    return f"{base}/{quote}"
