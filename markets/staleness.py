"""How old the data behind a number is, said with the number: "as of 2025-09-03 (459 days old)".

Every figure tapebot shows comes from daily bars of some date; a trader must see at a glance
whether that date is today's session or months ago (the bundled dataset, a provider that stopped
updating). The age is counted in calendar days from the market's own date today (Shanghai for
A-shares, UTC for crypto)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

_ZONES = {"cn": ZoneInfo("Asia/Shanghai"), "index": ZoneInfo("Asia/Shanghai"), "crypto": UTC}
_LABELS = {
    "en": {
        "cn": "A-shares",
        "crypto": "BTC/ETH",
        "today": "today",
        "one": "1 day old",
        "days": "{n} days old",
    },
    "zh": {"cn": "A股", "crypto": "BTC/ETH", "today": "今天", "one": "1 天前", "days": "{n} 天前"},
}


def market_today(now: datetime, market: str = "cn") -> date:
    return now.astimezone(_ZONES.get(market, UTC)).date()


def age_days(as_of: date, now: datetime, market: str = "cn") -> int:
    return max(0, (market_today(now, market) - as_of).days)


def age_text(as_of: date, now: datetime, market: str = "cn", lang: str = "en") -> str:
    words = _LABELS.get(lang, _LABELS["en"])
    n = age_days(as_of, now, market)
    return words["today"] if n == 0 else words["one"] if n == 1 else words["days"].format(n=n)


def dated(as_of: date, now: datetime, market: str = "cn", lang: str = "en") -> str:
    """`2025-09-03 (459 days old)`; `2025-09-03（459 天前）` in Chinese."""
    age = age_text(as_of, now, market, lang)
    return f"{as_of}（{age}）" if lang == "zh" else f"{as_of} ({age})"


def data_dates(as_of: dict[str, date | None], now: datetime, lang: str = "en") -> str:
    """One line for /status and the brief: each market's data date and age."""
    words = _LABELS.get(lang, _LABELS["en"])
    sep = "；" if lang == "zh" else "; "
    parts = []
    for market, day in as_of.items():
        if day is None:
            continue
        joiner = " 截至 " if lang == "zh" else " as of "
        parts.append(f"{words.get(market, market)}{joiner}{dated(day, now, market, lang)}")
    return sep.join(parts)
