"""`DailyTrigger`: the APScheduler trigger for a brief spec (the maths are in scheduler/specs.py).

Its own module so that the specs (parsed by the schedule tools in every turn's process) do not
import APScheduler; only the scheduler (scheduler/app.py, jobs.py) and the schedule views need it.
Pickled into the job store as `scheduler.specs.DailyTrigger`, as before the move: that name still
resolves (scheduler/specs.py `__getattr__`), so stored jobs load either way.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from apscheduler.triggers.base import BaseTrigger

from scheduler.specs import DAYS, BriefSpec, BriefSpecError, next_fire_time, previous_fire_time


class DailyTrigger(BaseTrigger):  # type: ignore[misc]  # APScheduler 3 ships no types: Any to mypy
    """APScheduler trigger: once per allowed local date at HH:MM (plus `second`, see
    `spread_second`) in an IANA zone."""

    __module__ = "scheduler.specs"  # its name in pickled jobs (see the module docstring)

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

    def __getstate__(self) -> dict[str, object]:
        return {
            "version": 2,
            "days": self.days,
            "hour": self.hour,
            "minute": self.minute,
            "timezone": self.timezone,
            "second": self.second,
        }

    def __setstate__(self, state: dict[str, object]) -> None:
        self.days = str(state["days"])
        self.hour = int(state["hour"])  # type: ignore[call-overload]
        self.minute = int(state["minute"])  # type: ignore[call-overload]
        self.timezone = str(state["timezone"])
        self.second = int(state.get("second", 0))  # type: ignore[call-overload]  # version 1: on the minute
        self._tz = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DailyTrigger) and self.__getstate__() == other.__getstate__()

    def __hash__(self) -> int:
        return hash((self.days, self.hour, self.minute, self.timezone, self.second))

    def __str__(self) -> str:
        sec = f":{self.second:02d}" if self.second else ""
        return f"{self.days} {self.hour:02d}:{self.minute:02d}{sec} {self.timezone}"

    def __repr__(self) -> str:
        return f"<DailyTrigger ({self})>"
