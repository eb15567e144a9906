"""Brief specs and schedule maths: parsing, time zones, DST, trading days, the trigger's pickling,
and the sync job-store URL."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from apscheduler.triggers.cron import CronTrigger

from agent.errors import ConfigError
from scheduler.app_scheduler import sync_database_url
from scheduler.specs import (
    BriefSpec,
    BriefSpecError,
    DailyTrigger,
    next_fire_time,
    parse_brief_command,
    parse_brief_spec,
    previous_fire_time,
)

NY = ZoneInfo("America/New_York")
SH = ZoneInfo("Asia/Shanghai")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("08:30", BriefSpec("daily", "08:30", None)),
        ("/brief 8:30", BriefSpec("daily", "08:30", None)),
        ("/brief@tapebot 08:30 Asia/Shanghai", BriefSpec("daily", "08:30", "Asia/Shanghai")),
        ("weekdays 21:00", BriefSpec("weekdays", "21:00", None)),
        ("trading_days 08:30 Asia/Shanghai", BriefSpec("trading_days", "08:30", "Asia/Shanghai")),
        ("every trading day 09:15 America/New_York", BriefSpec("trading_days", "09:15", "America/New_York")),
        ("交易日 08:30 北京", BriefSpec("trading_days", "08:30", "Asia/Shanghai")),
        ("21:05 utc weekdays", BriefSpec("weekdays", "21:05", "UTC")),
    ],
)
def test_parse_brief_spec(text, expected):
    assert parse_brief_spec(text) == expected
    days, hhmm, tz = parse_brief_spec(text)  # a plain (days, "HH:MM", tz) triple too
    assert (days, hhmm, tz) == tuple(expected)


@pytest.mark.parametrize(
    "text", ["", "weekdays", "25:00", "08:61", "08:30 Mars/Olympus", "08:30 09:00", "daily weekdays 08:30"]
)
def test_parse_brief_spec_rejects(text):
    with pytest.raises(BriefSpecError):
        parse_brief_spec(text)


def test_parse_brief_command():
    assert parse_brief_command("/brief").action == "show"
    assert parse_brief_command("/brief off").action == "off"
    assert parse_brief_command("/brief now").action == "now"
    assert parse_brief_command("/brief pause").action == "pause"
    assert parse_brief_command("/brief resume").action == "resume"
    cmd = parse_brief_command("/brief tz Asia/Shanghai")
    assert (cmd.action, cmd.timezone) == ("timezone", "Asia/Shanghai")
    cmd = parse_brief_command("/brief weekdays 21:00")
    assert cmd.action == "set" and cmd.spec == BriefSpec("weekdays", "21:00", None)
    assert cmd.spec.text == "weekdays 21:00"
    assert BriefSpec("daily", "08:30", None).text == "08:30"


def test_daily_fire_times_follow_new_york_across_the_march_change():
    # 2024-03-10 02:00 EST → 03:00 EDT. An 08:30 brief stays at 08:30 local; UTC moves by an hour.
    trig = DailyTrigger("daily", 8, 30, "America/New_York")
    first = trig.get_next_fire_time(None, datetime(2024, 3, 8, 12, 0, tzinfo=UTC))
    fires = [first]
    for _ in range(3):
        fires.append(trig.get_next_fire_time(fires[-1], fires[-1]))
    assert [f.astimezone(NY).strftime("%m-%d %H:%M") for f in fires] == [
        "03-08 08:30",
        "03-09 08:30",
        "03-10 08:30",
        "03-11 08:30",
    ]
    assert [f.astimezone(UTC).hour for f in fires] == [13, 13, 12, 12]


def test_time_skipped_by_spring_forward_fires_once_an_hour_later():
    trig = DailyTrigger("daily", 2, 30, "America/New_York")
    fire = trig.get_next_fire_time(None, datetime(2024, 3, 10, 0, 0, tzinfo=NY))
    assert fire.astimezone(UTC) == datetime(2024, 3, 10, 7, 30, tzinfo=UTC)  # 03:30 EDT
    nxt = trig.get_next_fire_time(fire, fire)
    assert nxt.astimezone(NY).strftime("%m-%d %H:%M %Z") == "03-11 02:30 EDT"


def test_repeated_hour_on_fall_back_fires_once_not_twice():
    # CronTrigger (3.11) fires twice on 2024-11-03 for 01:30 New York; DailyTrigger once.
    start = datetime(2024, 11, 2, 12, 0, tzinfo=NY)
    cron = CronTrigger(hour=1, minute=30, timezone=NY)
    ours = DailyTrigger("daily", 1, 30, "America/New_York")

    def fires(trigger, n=3):
        out = [trigger.get_next_fire_time(None, start)]
        while len(out) < n:
            out.append(trigger.get_next_fire_time(out[-1], out[-1]))
        return [f.astimezone(NY).date().isoformat() for f in out]

    assert fires(cron) == ["2024-11-03", "2024-11-03", "2024-11-04"]
    assert fires(ours) == ["2024-11-03", "2024-11-04", "2024-11-05"]


def test_shanghai_has_no_dst_and_matches_cron():
    ours = DailyTrigger("daily", 8, 30, "Asia/Shanghai")
    cron = CronTrigger(hour=8, minute=30, timezone=SH)
    a = b = datetime(2024, 3, 1, tzinfo=UTC)
    for _ in range(60):
        a = ours.get_next_fire_time(None, a + timedelta(seconds=1))
        b = cron.get_next_fire_time(None, b + timedelta(seconds=1))
        assert a == b
        assert a.astimezone(UTC).hour == 0 and a.astimezone(UTC).minute == 30


def test_weekdays_and_trading_days_skip_weekends():
    friday_evening = datetime(2024, 6, 7, 22, 0, tzinfo=SH)
    for days in ("weekdays", "trading_days"):
        nxt = next_fire_time(days, 8, 30, SH, friday_evening)
        assert nxt.date().isoformat() == "2024-06-10"  # Monday
    assert next_fire_time("daily", 8, 30, SH, friday_evening).date().isoformat() == "2024-06-08"


def test_previous_fire_time():
    now = datetime(2024, 6, 10, 8, 29, tzinfo=SH)  # Monday, a minute before
    assert previous_fire_time("weekdays", 8, 30, SH, now).date().isoformat() == "2024-06-07"
    assert previous_fire_time("daily", 8, 30, SH, now).date().isoformat() == "2024-06-09"
    exact = datetime(2024, 6, 10, 8, 30, tzinfo=SH)
    assert previous_fire_time("daily", 8, 30, SH, exact) == exact


def test_fire_time_is_computed_in_the_zone_not_the_hosts():
    # The same instant, briefs in two zones: each fires at its own local 08:30.
    now = datetime(2024, 1, 15, 0, 0, tzinfo=UTC)
    sh = next_fire_time("daily", 8, 30, SH, now)
    ny = next_fire_time("daily", 8, 30, NY, now)
    assert sh.astimezone(UTC) == datetime(2024, 1, 15, 0, 30, tzinfo=UTC)
    assert ny.astimezone(UTC) == datetime(2024, 1, 15, 13, 30, tzinfo=UTC)


def test_trigger_pickles_by_value():
    trig = DailyTrigger("trading_days", 8, 30, "Asia/Shanghai")
    copy = pickle.loads(pickle.dumps(trig))
    assert copy == trig and str(copy) == "trading_days 08:30 Asia/Shanghai"
    now = datetime(2024, 6, 7, 22, 0, tzinfo=UTC)
    assert copy.get_next_fire_time(None, now) == trig.get_next_fire_time(None, now)


def test_sync_database_url():
    assert str(sync_database_url("sqlite+aiosqlite:////tmp/x/tapebot.db")) == "sqlite:////tmp/x/tapebot.db"
    assert sync_database_url("sqlite+aiosqlite://") is None
    assert sync_database_url("sqlite+aiosqlite:///:memory:") is None
    pg = sync_database_url("postgresql+asyncpg://bot:pw@db:5432/tapebot?ssl=require")
    assert pg.drivername == "postgresql+psycopg"
    assert pg.password == "pw" and dict(pg.query) == {"sslmode": "require"}
    assert sync_database_url("postgresql://bot@db/tapebot").drivername == "postgresql"
    with pytest.raises(ConfigError):
        sync_database_url("oracle+asyncfoo://x/y")


# ---- spreading briefs over their minute (issue 21) -----------------------------------------------
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from scheduler.specs import spread_second  # noqa: E402

ZONES = ["UTC", "Asia/Shanghai", "America/New_York", "Europe/London", "Australia/Lord_Howe"]


@given(
    st.sampled_from(["daily", "weekdays", "trading_days"]),
    st.integers(0, 23),
    st.integers(0, 59),
    st.sampled_from(ZONES),
    st.integers(0, 59),
    # hypothesis wants naive bounds; `timezones` makes the drawn values aware
    st.datetimes(min_value=datetime(2024, 1, 1), max_value=datetime(2030, 1, 1), timezones=st.just(UTC)),  # noqa: DTZ001
)
def test_a_spread_trigger_fires_at_the_plain_ones_instants_plus_its_second(
    days, hour, minute, zone, second, now
):
    plain = DailyTrigger(days, hour, minute, zone)
    spread = DailyTrigger(days, hour, minute, zone, second)
    shift = timedelta(seconds=second)
    nxt = spread.get_next_fire_time(None, now)
    assert nxt >= now and nxt - shift == plain.get_next_fire_time(None, now - shift)
    after = spread.get_next_fire_time(nxt, nxt)
    assert after > nxt and after - shift == plain.get_next_fire_time(nxt - shift, nxt - shift)
    prev = spread.previous(now)
    assert prev is not None and prev <= now and prev - shift == plain.previous(now - shift)
    # within the minute it belongs to: same local date, same HH:MM
    assert nxt.astimezone(ZoneInfo(zone)).replace(second=0) == (nxt - shift).astimezone(ZoneInfo(zone))


def test_spread_seconds_are_stable_and_cover_the_minute():
    ids = [f"sch_{i:08x}" for i in range(10_000)]
    seconds = [spread_second(i) for i in ids]
    assert seconds == [spread_second(i) for i in ids]  # no salted hash
    counts = [seconds.count(s) for s in range(60)]
    assert min(counts) > 10_000 / 60 / 2  # roughly even: no second gets a crowd


def test_a_spread_trigger_pickles_and_an_old_pickle_fires_on_the_minute():
    t = DailyTrigger("daily", 8, 30, "Asia/Shanghai", 17)
    assert pickle.loads(pickle.dumps(t)) == t and str(t) == "daily 08:30:17 Asia/Shanghai"
    old = DailyTrigger.__new__(DailyTrigger)
    old.__setstate__({"version": 1, "days": "daily", "hour": 8, "minute": 30, "timezone": "Asia/Shanghai"})
    assert old == DailyTrigger("daily", 8, 30, "Asia/Shanghai")
    with pytest.raises(ValueError):
        DailyTrigger("daily", 8, 30, "UTC", 60)
