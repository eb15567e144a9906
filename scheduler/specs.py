"""Brief specs and the schedule maths: pure functions, tested with fixed aware datetimes.

A spec is a day set plus a local time: "08:30", "weekdays 21:00", "trading_days 08:30", each with an
IANA zone. `DailyTrigger` is the APScheduler trigger for it. We use our own trigger rather than
`CronTrigger` because CronTrigger (3.11, zoneinfo) fires twice on a DST fall-back day for a time in
the repeated hour; ours yields exactly one instant per local date (the first occurrence of an
ambiguous time; for a time skipped by spring-forward, the same instant one hour later on the
wall clock, as cron does).
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Literal, NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agent.errors import TapebotError
from scheduler.i18n import say

Days = Literal["daily", "weekdays", "trading_days"]
DAYS: tuple[Days, ...] = ("daily", "weekdays", "trading_days")


class ScheduleError(TapebotError):
    """A schedule request that cannot be honoured; the message says what to fix. `key` and
    `params` name the same message in scheduler/i18n.py, so a chat hears it in its language."""

    def __init__(self, message: str = "", *, key: str = "", **params: Any):
        self.key, self.params = key, params
        super().__init__(message or say("en", f"err_{key}", **params))


class BriefSpecError(ScheduleError, ValueError):
    """The brief spec text could not be parsed."""


class BriefSpec(NamedTuple):
    days: Days
    time: str  # "HH:MM", 24-hour, local to `tz`
    tz: str | None  # IANA name; None = the chat's default zone

    @property
    def hour(self) -> int:
        return int(self.time[:2])

    @property
    def minute(self) -> int:
        return int(self.time[3:])

    @property
    def text(self) -> str:
        """The stored spec text, without the zone: "08:30", "weekdays 21:00", ..."""
        return self.time if self.days == "daily" else f"{self.days} {self.time}"


_DAY_WORDS: dict[str, Days] = {
    "daily": "daily",
    "everyday": "daily",
    "every_day": "daily",
    "每天": "daily",
    "每日": "daily",
    "weekdays": "weekdays",
    "weekday": "weekdays",
    "workdays": "weekdays",
    "workday": "weekdays",
    "mon-fri": "weekdays",
    "工作日": "weekdays",
    "trading_days": "trading_days",
    "trading_day": "trading_days",
    "tradingdays": "trading_days",
    "trading": "trading_days",
    "every_trading_day": "trading_days",
    "交易日": "trading_days",
    "每个交易日": "trading_days",
}
_ZONE_ALIASES = {
    "utc": "UTC",
    "gmt": "UTC",
    "beijing": "Asia/Shanghai",
    "shanghai": "Asia/Shanghai",
    "china": "Asia/Shanghai",
    "北京": "Asia/Shanghai",
    "上海": "Asia/Shanghai",
    "hongkong": "Asia/Hong_Kong",
    "hong_kong": "Asia/Hong_Kong",
    "香港": "Asia/Hong_Kong",
    "tokyo": "Asia/Tokyo",
    "singapore": "Asia/Singapore",
    "london": "Europe/London",
    "new_york": "America/New_York",
    "newyork": "America/New_York",
}
_TIME = re.compile(r"^(\d{1,2})[:：.](\d{2})$")
_PHRASES = (
    (re.compile(r"every\s+trading\s+days?", re.I), "trading_days"),
    (re.compile(r"trading\s+days?", re.I), "trading_days"),
    (re.compile(r"every\s+days?", re.I), "daily"),
    (re.compile(r"every\s+weekdays?", re.I), "weekdays"),
)


def normalize_timezone(name: str) -> str:
    """An IANA zone name (a few city aliases accepted), or BriefSpecError."""
    raw = name.strip()
    candidate = _ZONE_ALIASES.get(raw.lower().replace(" ", "_"), raw)
    try:
        ZoneInfo(candidate)
    except (ZoneInfoNotFoundError, ValueError):
        raise BriefSpecError(key="unknown_zone", name=name) from None
    return candidate


def parse_brief_spec(text: str) -> BriefSpec:
    """Parse "08:30", "08:30 Asia/Shanghai", "weekdays 21:00", "trading_days 08:30 Asia/Shanghai"
    (a leading "/brief" is ignored). Returns (days, "HH:MM", tz-or-None)."""
    body = text.strip()
    body = re.sub(r"^/brief(@\S+)?\b", "", body).strip()
    for pattern, word in _PHRASES:
        body = pattern.sub(word, body)
    days: Days | None = None
    hhmm: str | None = None
    tz: str | None = None
    for token in body.split():
        low = token.lower()
        if low in _DAY_WORDS:
            if days is not None:
                raise BriefSpecError(key="two_day_sets", text=text)
            days = _DAY_WORDS[low]
            continue
        m = _TIME.match(token)
        if m:
            hour, minute = int(m.group(1)), int(m.group(2))
            if hour > 23 or minute > 59 or hhmm is not None:
                raise BriefSpecError(key="bad_time", text=text)
            hhmm = f"{hour:02d}:{minute:02d}"
            continue
        if tz is not None:
            raise BriefSpecError(key="not_understood", token=token, text=text)
        tz = normalize_timezone(token)
    if hhmm is None:
        raise BriefSpecError(key="needs_time")
    return BriefSpec(days or "daily", hhmm, tz)


def parse_stored_spec(spec: str, tz: str) -> BriefSpec:
    parsed = parse_brief_spec(spec)
    return BriefSpec(parsed.days, parsed.time, tz)


BriefAction = Literal["show", "set", "off", "now", "pause", "resume", "timezone"]


@dataclass(frozen=True, slots=True)
class BriefCommand:
    action: BriefAction
    spec: BriefSpec | None = None
    timezone: str | None = None


def parse_brief_command(text: str) -> BriefCommand:
    """`/brief` arguments → a command: "" (show), "off", "now", "pause", "resume", "tz <zone>",
    or a spec (set)."""
    body = re.sub(r"^/brief(@\S+)?\b", "", text.strip()).strip()
    low = body.lower()
    if not body or low in ("show", "list", "status"):
        return BriefCommand("show")
    if low in ("off", "stop", "cancel", "delete", "关闭", "取消"):
        return BriefCommand("off")
    if low in ("now", "立即", "现在"):
        return BriefCommand("now")
    if low in ("pause", "暂停"):
        return BriefCommand("pause")
    if low in ("resume", "恢复", "on"):
        return BriefCommand("resume")
    parts = body.split(None, 1)
    if parts[0].lower() in ("tz", "timezone", "zone", "时区"):
        if len(parts) < 2:
            raise BriefSpecError(key="needs_zone")
        return BriefCommand("timezone", timezone=normalize_timezone(parts[1]))
    return BriefCommand("set", spec=parse_brief_spec(body))


# ---- schedule maths ---------------------------------------------------------------------------------
def _allowed(days: str, d: date) -> bool:
    # trading_days fire Monday–Friday; holidays are skipped at run time by the injected calendar.
    return days == "daily" or d.weekday() < 5


def fire_on(days: str, hour: int, minute: int, tz: ZoneInfo, d: date) -> datetime | None:
    """The one instant a schedule fires on local date `d` (None if not a firing day), in `tz`."""
    if not _allowed(days, d):
        return None
    # fold=0: the first occurrence of an ambiguous time; a non-existent time resolves with the
    # pre-transition offset, i.e. one hour later on the new wall clock. Normalise via UTC.
    local = datetime.combine(d, time(hour, minute), tzinfo=tz)
    return local.astimezone(UTC).astimezone(tz)


def next_fire_time(days: str, hour: int, minute: int, tz: ZoneInfo, start: datetime) -> datetime:
    """The first firing instant at or after `start` (aware)."""
    start_utc = start.astimezone(UTC)
    first = start_utc.astimezone(tz).date() - timedelta(days=1)
    for i in range(10):
        candidate = fire_on(days, hour, minute, tz, first + timedelta(days=i))
        if candidate is not None and candidate.astimezone(UTC) >= start_utc:
            return candidate
    raise AssertionError("unreachable: every schedule fires within a week")  # pragma: no cover


def previous_fire_time(days: str, hour: int, minute: int, tz: ZoneInfo, now: datetime) -> datetime | None:
    """The latest firing instant at or before `now` (aware)."""
    now_utc = now.astimezone(UTC)
    last = now_utc.astimezone(tz).date() + timedelta(days=1)
    for i in range(10):
        candidate = fire_on(days, hour, minute, tz, last - timedelta(days=i))
        if candidate is not None and candidate.astimezone(UTC) <= now_utc:
            return candidate
    return None  # pragma: no cover


def spread_second(schedule_id: str) -> int:
    """The second within its minute at which a brief fires, stable per schedule (crc32, not the
    salted `hash`). Thousands of chats pick 08:30; firing them all in one second made the last
    ones 10 s late or more, while spread over the minute each fires within a second."""
    return zlib.crc32(schedule_id.encode()) % 60


class DailyTrigger:
    """APScheduler trigger: once per allowed local date at HH:MM (plus `second`, see
    `spread_second`) in an IANA zone. A virtual subclass of APScheduler's `BaseTrigger` (an
    interface: one abstract method), registered by scheduler/app_scheduler.py: inheriting it would make
    every process that parses a spec (the schedule tools, a one-shot turn) import APScheduler,
    ~6 ms."""

    def __init__(self, days: str, hour: int, minute: int, timezone: str, second: int = 0):
        if days not in DAYS:
            raise BriefSpecError(f"unknown day set {days!r}")
        if not 0 <= second < 60:
            raise BriefSpecError(f"second {second} is not within a minute")
        self.days: str = days
        self.hour = hour
        self.minute = minute
        self.timezone = timezone
        self.second = second
        self._tz: ZoneInfo | None = None

    @classmethod
    def from_spec(cls, spec: BriefSpec, tz: str, second: int = 0) -> DailyTrigger:
        return cls(spec.days, spec.hour, spec.minute, tz, second)

    @property
    def zone(self) -> ZoneInfo:
        if self._tz is None:
            self._tz = ZoneInfo(self.timezone)
        return self._tz

    def get_next_fire_time(self, previous_fire_time: datetime | None, now: datetime) -> datetime | None:
        # every firing is the minute's instant plus `second`: shift the question, then the answer
        shift = timedelta(seconds=self.second)
        if previous_fire_time is not None:
            # strictly after the previous firing (one per local date by construction)
            start = previous_fire_time - shift + timedelta(microseconds=1)
        else:
            start = now - shift
        return next_fire_time(self.days, self.hour, self.minute, self.zone, start) + shift

    def previous(self, now: datetime) -> datetime | None:
        shift = timedelta(seconds=self.second)
        found = previous_fire_time(self.days, self.hour, self.minute, self.zone, now - shift)
        return None if found is None else found + shift

    def _key(self) -> tuple[str, int, int, str, int]:
        return (self.days, self.hour, self.minute, self.timezone, self.second)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DailyTrigger) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        sec = f":{self.second:02d}" if self.second else ""
        return f"{self.days} {self.hour:02d}:{self.minute:02d}{sec} {self.timezone}"

    def __repr__(self) -> str:
        return f"<DailyTrigger ({self})>"
