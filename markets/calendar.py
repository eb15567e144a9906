"""Trading calendars: the SSE calendar for A-shares (bundled, 1990-12-19 → 2026-12-31) and an
every-day calendar for crypto.

Outside the known range weekdays are assumed to be trading days except the SSE's fixed-date
holidays (1 January, 1 May, 1–7 October: closed on every weekday they fell on since 2009); the
lunar-calendar holidays (Spring Festival, Qingming, Dragon Boat, Mid-Autumn) are not known there.
That guess is never silent:
`warning(day)` says so (shown by /status, `tapebot config check`, briefs and the market tools), and
also when the range ends within 30 days. A newer calendar: `tapebot data update-calendar` (akshare's
`tool_trade_date_hist_sina`, the `akshare` extra) writes `$TAPEBOT_HOME/data/cn_trade_calendar.json`,
or drop such a file there by hand (a JSON list of "YYYY-MM-DD" trading days); it overrides the
bundled one.
"""

from __future__ import annotations

import bisect
import importlib
import json
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from agent.texts import Text
from agent.texts import words as texts_in

if TYPE_CHECKING:
    import numpy as np

CALENDAR_FILE = "cn_trade_calendar.json"
WARN_DAYS = 30  # warn this long before the known range ends
EXCHANGE_TZ = ZoneInfo("Asia/Shanghai")
SSE_CLOSE = time(15, 0)  # the closing auction ends: an order after it belongs to the next session
# (month, day) closed on every weekday they fell on in the bundled calendar since 2009
SSE_FIXED_HOLIDAYS = frozenset({(1, 1), (5, 1), *((10, d) for d in range(1, 8))})

# the warning reaches chats (/status) in their language; markets sits below bot/, so the words are here
CALENDAR_STRINGS: dict[str, Text] = {
    "fix": Text(
        en="run `tapebot data update-calendar` (akshare extra) or put a newer {file} into $TAPEBOT_HOME/data/",
        zh="运行 `tapebot data update-calendar`（需 akshare 扩展），或把更新的 {file} 放到 $TAPEBOT_HOME/data/",
    ),
    "outside": Text(
        en="the {name} trading calendar ends {last} ({source}); {day} is outside it, so weekdays are assumed to be trading days except 1 Jan, 1 May and 1–7 Oct (the lunar-calendar holidays are not known): {fix}",
        zh="{name} 交易日历只到 {last}（{source}）；{day} 不在其中，因此除元旦、5月1日和10月1–7日外把工作日都当作交易日（不知道春节等农历节假日）：{fix}",
    ),
    "ends_soon": Text(
        en="the {name} trading calendar ends {last} ({source}), in {left} days: {fix}",
        zh="{name} 交易日历只到 {last}（{source}），还剩 {left} 天：{fix}",
    ),
}


def exchange_today(now: datetime | None = None) -> date:
    """Today's date at the exchange (Asia/Shanghai) for a wall-clock instant (default: now)."""
    return (now or datetime.now(UTC)).astimezone(EXCHANGE_TZ).date()


def _day(d: Any) -> date:
    """A calendar day from a date, a datetime, an ISO string or a numpy datetime64."""
    if hasattr(d, "astype") and not isinstance(d, date):  # numpy datetime64 → date
        d = d.astype("datetime64[D]").astype(object)
    return _to_date(d)


def _to_date(d: date | str) -> date:
    if isinstance(d, str):
        return date.fromisoformat(d if "-" in d else f"{d[:4]}-{d[4:6]}-{d[6:]}")
    if hasattr(d, "date") and type(d) is not date:  # datetime → date
        day: date = d.date()
        return day
    return d


class TradingCalendar:
    """Sorted set of trading days with fast neighbour lookups. Plain dates and `bisect`, no numpy:
    the scheduler asks it every day, and `tapebot run` should not load numpy for that."""

    def __init__(
        self,
        days: list[date] | np.ndarray | None,
        name: str = "SSE",
        source: str = "bundled",
        fixed_holidays: frozenset[tuple[int, int]] = frozenset(),
    ):
        self.name = name
        self.source = source
        self.fixed_holidays = fixed_holidays  # (month, day) closed beyond the known range
        self.every_day = days is None
        self._days: list[date] = sorted({_day(d) for d in (days if days is not None else [])})

    @classmethod
    def sse(cls, data_dir: Path | str | None = None) -> TradingCalendar:
        """The SSE calendar: `<data_dir>/cn_trade_calendar.json` when that file exists (a newer
        calendar dropped in by hand or by `tapebot data update-calendar`), else the bundled one."""
        if data_dir is not None and (path := Path(data_dir) / CALENDAR_FILE).is_file():
            days = _parse_days(path.read_text("utf-8"), str(path))
            return cls(days, name="SSE", source=str(path), fixed_holidays=SSE_FIXED_HOLIDAYS)
        text = resources.files("markets.dataset").joinpath(CALENDAR_FILE).read_text("utf-8")
        return cls(_parse_days(text, CALENDAR_FILE), "SSE", "bundled", SSE_FIXED_HOLIDAYS)

    @classmethod
    def crypto(cls) -> TradingCalendar:
        return cls(None, name="24/7")

    @property
    def first(self) -> date | None:
        return None if self.every_day or not self._days else self._days[0]

    @property
    def last(self) -> date | None:
        return None if self.every_day or not self._days else self._days[-1]

    def covers(self, d: date | str) -> bool:
        d = _to_date(d)
        return self.every_day or (self.first is not None and self.first <= d <= self.last)  # type: ignore[operator]

    def warning(self, today: date | str, horizon: int = WARN_DAYS, *, lang: str = "en") -> str | None:
        """What to tell the user about the calendar's range on `today` (in `lang`: en or zh), or
        None when all is well."""
        d = _to_date(today)
        if self.every_day or self.last is None:
            return None
        words = texts_in(CALENDAR_STRINGS, lang)
        about = {"name": self.name, "last": self.last, "source": self.source}
        fix = words["fix"].format(file=CALENDAR_FILE)
        if not self.covers(d):
            return words["outside"].format(day=d, fix=fix, **about)
        left = (self.last - d).days
        if left < horizon:
            return words["ends_soon"].format(left=left, fix=fix, **about)
        return None

    def is_trading_day(self, d: date | str) -> bool:
        d = _to_date(d)
        if self.every_day:
            return True
        if not self.covers(d):
            return d.weekday() < 5 and (d.month, d.day) not in self.fixed_holidays
        i = bisect.bisect_left(self._days, d)
        return i < len(self._days) and self._days[i] == d

    def session_of(self, now: datetime) -> date:
        """The session an order placed at `now` belongs to: today at the exchange when it is a
        trading day and the close (15:00) has not passed, else the next trading day (an order on
        Monday at 20:00 is Tuesday's, one on Saturday is Monday's)."""
        local = now.astimezone(EXCHANGE_TZ)
        today = local.date()
        if self.is_trading_day(today) and local.time() < SSE_CLOSE:
            return today
        return self.next_trading_day(today)

    def next_trading_day(self, d: date | str, n: int = 1) -> date:
        """The n-th trading day strictly after `d`."""
        d = _to_date(d)
        for _ in range(n):
            d = d + timedelta(days=1)
            while not self.is_trading_day(d):
                d = d + timedelta(days=1)
        return d

    def prev_trading_day(self, d: date | str, n: int = 1) -> date:
        """The n-th trading day strictly before `d`."""
        d = _to_date(d)
        for _ in range(n):
            d = d - timedelta(days=1)
            while not self.is_trading_day(d):
                d = d - timedelta(days=1)
        return d

    def trading_days(self, start: date | str, end: date | str) -> list[date]:
        s, e = _to_date(start), _to_date(end)
        out, d = [], s
        while d <= e:
            if self.is_trading_day(d):
                out.append(d)
            d += timedelta(days=1)
        return out


def _parse_days(text: str, where: str) -> list[date]:
    try:
        days = [date.fromisoformat(str(x)[:10]) for x in json.loads(text)]
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{where}: not a JSON list of YYYY-MM-DD trading days ({exc})") from None
    if not days:
        raise ValueError(f"{where}: no trading days")
    return days


@dataclass(frozen=True, slots=True)
class CalendarUpdate:
    path: Path
    first: date
    last: date
    added: int  # trading days beyond the previous calendar's end


def fetch_akshare_days(akshare: Any = None) -> list[date]:
    """Trading days from akshare (`tool_trade_date_hist_sina`: a frame with a `trade_date` column)."""
    ak = akshare if akshare is not None else importlib.import_module("akshare")
    return sorted({_to_date(str(d)[:10]) for d in ak.tool_trade_date_hist_sina()["trade_date"]})


def update_calendar(data_dir: Path | str, akshare: Any = None) -> CalendarUpdate:
    """Fetch the SSE calendar from akshare and write `<data_dir>/cn_trade_calendar.json`. The fetched
    days replace the known ones from their first day on; a response that does not reach the current
    calendar's end is refused (nothing is written)."""
    current = TradingCalendar.sse(data_dir)
    fetched = fetch_akshare_days(akshare)
    if not fetched:
        raise ValueError("akshare returned no trading days; nothing written")
    assert current.last is not None
    if fetched[-1] < current.last:
        raise ValueError(
            f"akshare's calendar ends {fetched[-1]}, before the current one ({current.last}); nothing written"
        )
    keep = [d for d in current._days if d < fetched[0]]
    days = keep + fetched
    path = Path(data_dir) / CALENDAR_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps([str(d) for d in days]), encoding="utf-8")
    tmp.replace(path)  # atomic: a reader never sees half a file
    return CalendarUpdate(path, days[0], days[-1], sum(d > current.last for d in fetched))
