"""AppScheduler on a real SQLite file: persistence across a restart, missed-run catch-up (one run,
not five), two schedulers on one database (one runs, the other stands by and takes over), run
claims against double fires, trading-day skips, delivery retries, housekeeping, reconcile.

APScheduler 3 reads the wall clock itself, so missed runs are produced by storing a job's next run
in its "five runs ago" state (`next_run_time` in the past) — never by sleeping. The lease
and our bookkeeping use the injected clock."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from scheduler.app_scheduler import LEASE_NAME, AppScheduler
from scheduler.jobs import JobContext, execute_brief
from scheduler.service import ScheduleService
from scheduler.store import Schedule, new_schedule_id
from tests.fakes.recorder import Recorder
from tests.fakes.waits import eventually

SH = ZoneInfo("Asia/Shanghai")
NY = ZoneInfo("America/New_York")


async def make_schedule(store, *, chat: str = "tg:1", spec: str = "08:30", tz: str = "UTC") -> Schedule:
    now = datetime.now(UTC)
    s = Schedule(id=new_schedule_id(), chat_key=chat, spec=spec, tz=tz, created_at=now, updated_at=now)
    await store.create_schedule(s)
    return s


def later_hhmm(tz: ZoneInfo, hours: float = 3) -> str:
    """A local time that will not come round while the test runs."""
    return f"{datetime.now(tz) + timedelta(hours=hours):%H:%M}"


def app(store, **kw) -> AppScheduler:
    kw.setdefault("retry_delays", ())
    kw.setdefault("stop_timeout", 2.0)
    kw.setdefault("spread_briefs", False)  # on the minute: these tests compare exact instants
    return AppScheduler(store, **kw)


async def test_jobs_survive_a_restart_with_the_same_next_run(store):
    rec = Recorder()
    a = app(store, on_brief=rec, default_timezone="Asia/Shanghai")
    await a.start()
    assert a.is_leader
    service = ScheduleService(store, a)
    s = await service.create("tg:1", f"trading_days {later_hhmm(SH)} Asia/Shanghai", created_by="u1")
    before = await a.next_run_time(s.job_id)
    assert before is not None and before > datetime.now(UTC)
    await a.stop()

    b = app(store, on_brief=rec)
    await b.start()
    try:
        assert b.is_leader
        assert await b.next_run_time(s.job_id) == before  # same job, same next run
        assert b.last_reconcile is not None and b.last_reconcile.added == 0
        assert rec.calls == []
    finally:
        await b.stop()


async def stage_missed_job(store, schedule: Schedule, next_run_time: datetime, grace: int = 3600) -> None:
    """Write a brief job into the store as a crashed process would have left it: a standby
    scheduler (the lease is held elsewhere) adds it without firing it."""
    now = datetime.now(UTC)
    await store.acquire_lease(LEASE_NAME, "elsewhere", now=now, ttl=3600)
    standby = app(store, brief_grace_time=grace)
    await standby.start()
    assert not standby.is_leader
    await standby.add_brief_job(schedule, next_run_time=next_run_time)
    await standby.stop()
    await store.release_lease(LEASE_NAME, "elsewhere", now=now)


@pytest.mark.parametrize("grace", [3600, 7 * 86400])
async def test_downtime_across_five_runs_yields_one_catch_up_run(store, grace):
    due = (datetime.now(UTC) - timedelta(minutes=2)).replace(second=0, microsecond=0)
    s = await make_schedule(store, spec=f"{due:%H:%M}")
    await stage_missed_job(store, s, due - timedelta(days=5), grace)  # 6 firings in the past

    rec = Recorder()
    b = app(store, on_brief=rec, brief_grace_time=grace)
    await b.start()
    try:
        await eventually(lambda: rec.calls)
        await eventually(lambda: _finished(store, s.id, due.date().isoformat()))
        assert rec.calls == [("tg:1", s.id)]  # one run, not six
        nxt = await b.next_run_time(s.job_id)
        assert nxt == due + timedelta(days=1)  # rescheduled for tomorrow, nothing left to catch up
        assert (await store.get_schedule(s.id)).last_status == "delivered"
    finally:
        await b.stop()
    assert rec.calls == [("tg:1", s.id)]


async def _finished(store, schedule_id: str, run_date: str) -> bool:
    run = await store.get_run(schedule_id, run_date)
    return bool(run and run["finished_at"] is not None)


async def test_runs_missed_beyond_the_grace_time_are_skipped_not_replayed(store):
    due = (datetime.now(UTC) - timedelta(hours=3)).replace(second=0, microsecond=0)
    s = await make_schedule(store, spec=f"{due:%H:%M}")
    await stage_missed_job(store, s, due - timedelta(days=5))

    rec = Recorder()
    b = app(store, on_brief=rec, brief_grace_time=3600)
    await b.start()
    try:

        async def noted():
            return (await store.get_schedule(s.id)).last_status.startswith("missed")

        await eventually(noted)
        assert rec.calls == []
        assert await b.next_run_time(s.job_id) == due + timedelta(days=1)
    finally:
        await b.stop()


async def test_two_schedulers_on_one_database_one_runs_the_other_stands_by(store, clock, caplog):
    caplog.set_level(logging.INFO, logger="scheduler.app_scheduler")
    rec_a, rec_b = Recorder(), Recorder()
    a = app(store, clock=clock, on_brief=rec_a, owner_id="proc-a", lease_ttl=30, renew_interval=0.05)
    b = app(store, clock=clock, on_brief=rec_b, owner_id="proc-b", lease_ttl=30, renew_interval=0.05)
    await a.start()
    await b.start()
    try:
        assert a.is_leader and not b.is_leader
        assert "scheduler standing by: lease held by proc-a" in caplog.text

        # A job added through the standby process is run by the leader, once.
        s1 = await make_schedule(store, spec=later_hhmm(UTC))
        await b.add_brief_job(s1, next_run_time=datetime.now(UTC) + timedelta(milliseconds=200))
        await eventually(lambda: rec_a.calls)
        assert rec_a.calls == [("tg:1", s1.id)] and rec_b.calls == []

        # The leader dies without releasing the lease; the standby takes over once it expires.
        await a.stop(release=False)
        clock.advance(31)
        assert await b.wait_until_leader(timeout=5)
        assert "scheduler active: proc-b holds the lease" in caplog.text
        s2 = await make_schedule(store, chat="tg:2", spec=later_hhmm(UTC))
        await b.add_brief_job(s2, next_run_time=datetime.now(UTC) + timedelta(milliseconds=100))
        await eventually(lambda: rec_b.calls)
        assert rec_b.calls == [("tg:2", s2.id)]  # s1 is not fired again by the new leader
        assert rec_a.calls == [("tg:1", s1.id)]
    finally:
        await a.stop()
        await b.stop()


def count_lease_checks(a: AppScheduler) -> list[int]:
    """A counter of the scheduler's lease checks: each one by the holder wakes a scheduling pass."""
    checks = [0]
    try_lease = a._try_lease

    async def counted():
        checks[0] += 1
        return await try_lease()

    a._try_lease = counted  # type: ignore[method-assign]
    return checks


async def passes_done(a: AppScheduler, checks: list[int], more: int = 3) -> None:
    """Let `more` lease checks (and the passes they wake) happen, then wait for the I/O thread:
    it is one thread, so the passes queued before this call have run when it answers."""
    target = checks[0] + more
    await eventually(lambda: checks[0] >= target)
    await a.job_ids()


async def test_a_prepared_scheduler_holds_the_lease_but_fires_nothing_until_opened(store, clock):
    """The app prepares its scheduler before the chats open and opens it after: a brief
    due at start-up waits for `open` — through lease renewals, each of which wakes a pass."""
    due = (datetime.now(UTC) - timedelta(minutes=2)).replace(second=0, microsecond=0)
    s = await make_schedule(store, spec=f"{due:%H:%M}")
    await stage_missed_job(store, s, due)
    rec = Recorder()
    a = app(store, clock=clock, on_brief=rec, renew_interval=0.02)
    checks = count_lease_checks(a)
    await a.prepare()
    try:
        assert a.is_leader and a.last_reconcile is not None  # the costly part is done
        await passes_done(a, checks)
        assert rec.calls == [] and await a.next_run_time(s.job_id) == due
        a.open()
        await eventually(lambda: _finished(store, s.id, due.date().isoformat()))
        assert rec.calls == [("tg:1", s.id)]
        assert (await store.get_run(s.id, due.date().isoformat()))["attempts"] == 1
    finally:
        await a.stop()


async def test_an_opened_standby_fires_nothing_until_it_takes_the_lease_over(store, clock):
    due = (datetime.now(UTC) - timedelta(minutes=2)).replace(second=0, microsecond=0)
    s = await make_schedule(store, spec=f"{due:%H:%M}")
    await stage_missed_job(store, s, due)
    await store.acquire_lease(LEASE_NAME, "elsewhere", now=clock.now(), ttl=3600)
    rec = Recorder()
    b = app(store, clock=clock, on_brief=rec, owner_id="proc-b", renew_interval=0.02)
    checks = count_lease_checks(b)
    await b.prepare()
    b.open()
    try:
        await passes_done(b, checks)
        assert not b.is_leader and rec.calls == []
        await store.release_lease(LEASE_NAME, "elsewhere", now=clock.now())
        assert await b.wait_until_leader(timeout=5)
        await eventually(lambda: _finished(store, s.id, due.date().isoformat()))
        assert rec.calls == [("tg:1", s.id)]
    finally:
        await b.stop()


async def test_a_standby_that_takes_over_before_it_is_opened_waits_for_open(store, clock):
    due = (datetime.now(UTC) - timedelta(minutes=2)).replace(second=0, microsecond=0)
    s = await make_schedule(store, spec=f"{due:%H:%M}")
    await stage_missed_job(store, s, due)
    await store.acquire_lease(LEASE_NAME, "elsewhere", now=clock.now(), ttl=3600)
    rec = Recorder()
    b = app(store, clock=clock, on_brief=rec, owner_id="proc-b", renew_interval=0.02)
    checks = count_lease_checks(b)
    await b.prepare()
    try:
        assert not b.is_leader
        await store.release_lease(LEASE_NAME, "elsewhere", now=clock.now())
        assert await b.wait_until_leader(timeout=5)  # the lease is kept while the chats open
        await passes_done(b, checks)
        assert rec.calls == [] and await b.next_run_time(s.job_id) == due
        b.open()
        await eventually(lambda: _finished(store, s.id, due.date().isoformat()))
        assert rec.calls == [("tg:1", s.id)]
    finally:
        await b.stop()


async def test_a_graceful_stop_hands_the_lease_over_at_once(store, clock):
    a = app(store, clock=clock, owner_id="proc-a", renew_interval=0.05)
    b = app(store, clock=clock, owner_id="proc-b", renew_interval=0.05)
    await a.start()
    await b.start()
    try:
        assert not b.is_leader
        await a.stop()  # releases: no need to wait for the ttl
        assert await b.wait_until_leader(timeout=5)
    finally:
        await b.stop()


async def test_run_claim_stops_a_second_fire_on_the_same_local_day(store, clock):
    rec = Recorder()
    ctx = JobContext(store=store, clock=clock, on_brief=rec, retry_delays=())
    s = await make_schedule(store, spec="08:30", tz="Asia/Shanghai")
    clock.set(datetime(2024, 6, 11, 8, 30, 2, tzinfo=SH))
    first = await execute_brief(ctx, "tg:1", s.id)
    clock.advance(5)  # e.g. a takeover re-fires the same trigger time
    second = await execute_brief(ctx, "tg:1", s.id)
    assert (first.status, first.run_date) == ("delivered", "2024-06-11")
    assert second.status == "duplicate"
    assert rec.calls == [("tg:1", s.id)]


async def test_dst_fall_back_repeated_hour_delivers_once(store, clock):
    rec = Recorder()
    ctx = JobContext(store=store, clock=clock, on_brief=rec, retry_delays=())
    s = await make_schedule(store, spec="01:30", tz="America/New_York")
    first_130 = datetime(2024, 11, 3, 5, 30, tzinfo=UTC)  # 01:30 EDT
    second_130 = datetime(2024, 11, 3, 6, 30, tzinfo=UTC)  # 01:30 EST, an hour later
    clock.set(first_130)
    assert (await execute_brief(ctx, "tg:1", s.id)).status == "delivered"
    clock.set(second_130)
    assert (await execute_brief(ctx, "tg:1", s.id)).status == "duplicate"
    assert len(rec.calls) == 1


async def test_trading_day_brief_skips_a_holiday_and_runs_the_next_day(store, clock):
    rec = Recorder()
    holiday = date(2024, 6, 10)  # Dragon Boat Festival, a Monday
    ctx = JobContext(
        store=store, clock=clock, on_brief=rec, retry_delays=(), is_trading_day=lambda d: d != holiday
    )
    s = await make_schedule(store, spec="trading_days 08:30", tz="Asia/Shanghai")
    clock.set(datetime(2024, 6, 10, 8, 30, 1, tzinfo=SH))
    out = await execute_brief(ctx, "tg:1", s.id)
    assert out.status == "skipped" and rec.calls == []
    assert "market closed" in (await store.get_schedule(s.id)).last_status
    clock.set(datetime(2024, 6, 11, 8, 30, 1, tzinfo=SH))
    assert (await execute_brief(ctx, "tg:1", s.id)).status == "delivered"
    assert rec.calls == [("tg:1", s.id)]


async def test_delivery_is_retried_with_backoff_and_failures_show_in_status(store, clock):
    sleeps: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    flaky = Recorder(fail=2, error=lambda: ConnectionError("telegram unreachable"))
    ctx = JobContext(store=store, clock=clock, on_brief=flaky, retry_delays=(30.0, 120.0), sleep=fake_sleep)
    s = await make_schedule(store, spec="08:30", tz="Asia/Shanghai")
    clock.set(datetime(2024, 6, 11, 8, 30, 1, tzinfo=SH))
    out = await execute_brief(ctx, "tg:1", s.id)
    assert (out.status, out.attempts) == ("delivered", 3)
    assert sleeps == [30.0, 120.0]

    dead = Recorder(fail=99, error=lambda: ConnectionError("telegram unreachable"))
    ctx = JobContext(store=store, clock=clock, on_brief=dead, retry_delays=(30.0, 120.0), sleep=fake_sleep)
    clock.set(datetime(2024, 6, 12, 8, 30, 1, tzinfo=SH))
    out = await execute_brief(ctx, "tg:1", s.id)
    assert (out.status, out.attempts) == ("failed", 3)
    row = await store.get_schedule(s.id)
    assert row.last_status == "failed" and "telegram unreachable" in row.last_error
    assert row.consecutive_failures == 1
    lines = await ScheduleService(store, clock=clock).status_lines("tg:1")
    assert "last: failed" in lines[0] and "telegram unreachable" in lines[0]


async def test_a_job_whose_schedule_was_deleted_removes_itself(store):
    rec = Recorder()
    a = app(store, on_brief=rec)
    await a.start()
    try:
        s = await make_schedule(store, spec=later_hhmm(UTC))
        await a.add_brief_job(s)
        await store.delete_schedule(s.id)  # e.g. deleted by another process
        out = await execute_brief(a.context, "tg:1", s.id)
        assert out.status == "missing"
        assert s.job_id not in await a.job_ids()
        assert rec.calls == []
    finally:
        await a.stop()


async def test_reconcile_adds_missing_jobs_and_drops_orphans(store):
    s1 = await make_schedule(store, spec=later_hhmm(UTC))
    s2 = await make_schedule(store, chat="tg:2", spec=later_hhmm(UTC))
    paused = await make_schedule(store, chat="tg:3", spec=later_hhmm(UTC))
    await store.set_paused(paused.id, True, at=datetime.now(UTC))
    a = app(store)
    await a.start()
    try:
        orphan = Schedule(**{**s1.model_dump(), "id": "sch_gone"})
        await a.add_brief_job(orphan)
        report = await a.reconcile()
        assert (report.schedules, report.added, report.removed) == (2, 0, 1)
        ids = await a.job_ids()
        assert {s1.job_id, s2.job_id} <= ids and paused.job_id not in ids and orphan.job_id not in ids
        assert a.last_reconcile is not None
    finally:
        await a.stop()
    # the first reconcile (at start) had added both jobs
    b = app(store)
    await b.start()
    try:
        assert b.last_reconcile.added == 0
    finally:
        await b.stop()


async def test_housekeeping_jobs_are_registered_and_fire_with_their_context(store):
    hits: list[str] = []

    async def prune_memory() -> int:
        hits.append("prune_memory")
        return 3

    async def cleanup_tasks() -> int:
        hits.append("cleanup_tasks")
        return 0

    a = app(
        store,
        housekeeping={"prune_memory": prune_memory, "cleanup_tasks": cleanup_tasks},
        housekeeping_at="03:50",
    )
    await a.start()
    try:
        ids = await a.job_ids()
        assert {
            "housekeeping:prune_memory",
            "housekeeping:cleanup_tasks",
            "housekeeping:prune_schedule_runs",
        } <= ids
        # Fire one now through APScheduler itself: the module-level job finds its app via the context.
        a._aps.modify_job("housekeeping:prune_memory", next_run_time=datetime.now(UTC))
        await eventually(lambda: "prune_memory" in hits)
        assert await a.run_housekeeping_now("cleanup_tasks")
        assert hits.count("prune_memory") == 1 and hits.count("cleanup_tasks") == 1
    finally:
        await a.stop()


async def test_migration_0004_matches_the_models(tmp_path):
    """Apply this revision's upgrade() on a fresh database and diff it against the ORM tables."""
    import importlib.util

    import sqlalchemy as sa
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    from memory.base import Base
    from memory.tasks import TABLES

    path = "memory/migrations/versions/0004_tasks_scheduler.py"
    spec = importlib.util.spec_from_file_location("mig_0004", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (module.revision, module.down_revision) == ("0004_tasks_scheduler", "0003_markets")
    # a later revision replaces APScheduler's job table with the next run times
    next_runs_spec = importlib.util.spec_from_file_location(
        "mig_0015", "memory/migrations/versions/0015_scheduler_next_runs.py"
    )
    next_runs = importlib.util.module_from_spec(next_runs_spec)
    next_runs_spec.loader.exec_module(next_runs)
    # and a later one gives the leases a subject (a chat lease's chat) beside the replicas' inbox
    inbox_spec = importlib.util.spec_from_file_location(
        "mig_0018", "memory/migrations/versions/0018_replica_inbox.py"
    )
    inbox = importlib.util.module_from_spec(inbox_spec)
    inbox_spec.loader.exec_module(inbox)

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'm.db'}")
    with engine.begin() as conn:
        ctx = MigrationContext.configure(conn, opts={"target_metadata": Base.metadata})
        with Operations.context(ctx):
            module.upgrade()
            next_runs.upgrade()
            inbox.upgrade()
        diffs = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    mine = {t.name for t in TABLES}

    def table_of(d) -> str:
        d = d[0] if isinstance(d, list) else d
        if d[0] in ("add_table", "remove_table"):
            return d[1].name
        if d[0] in ("add_column", "remove_column") or d[0].startswith("modify_"):
            return d[2]
        return d[1].table.name

    # a column a later revision changes (0014_column_limits) differs by exactly that change
    later_spec = importlib.util.spec_from_file_location(
        "mig_0014", "memory/migrations/versions/0014_column_limits.py"
    )
    later = importlib.util.module_from_spec(later_spec)
    later_spec.loader.exec_module(later)
    changed = {(t, c) for t, c, *_ in later.CHANGES}
    left = [
        d
        for d in diffs
        if table_of(d) in mine
        and not (isinstance(d, list) and d[0][0] == "modify_type" and d[0][2:4] in changed)
    ]
    assert left == []
    with engine.begin() as conn:
        module.downgrade.__globals__["op"]
        ctx = MigrationContext.configure(conn, opts={"target_metadata": Base.metadata})
        with Operations.context(ctx):
            inbox.downgrade()
            next_runs.downgrade()
            module.downgrade()
        assert sa.inspect(conn).get_table_names() == []
    engine.dispose()


@pytest.mark.parametrize("zone", ["Asia/Shanghai", "America/New_York"])
async def test_next_run_reported_in_the_schedules_zone(store, zone):
    a = app(store, default_timezone=zone)
    await a.start()
    try:
        service = ScheduleService(store, a)
        s = await service.create("tg:1", "07:15")
        assert s.tz == zone
        nxt = await a.next_run_time(s.job_id)
        local = nxt.astimezone(ZoneInfo(zone))
        assert (local.hour, local.minute) == (7, 15)
        assert service.next_run(s) == nxt
    finally:
        await a.stop()


async def test_concurrent_claims_are_batched_and_exactly_one_wins(store):
    now = datetime.now(UTC)
    same = await make_schedule(store, chat="tg:1")
    others = [await make_schedule(store, chat=f"tg:{i}") for i in range(2, 40)]
    paused = await make_schedule(store, chat="tg:p")
    await store.set_paused(paused.id, True, at=now)

    async def claim(s, owner="p1"):
        return await store.claim_run(s.id, s.chat_key, "2025-01-02", scheduled_for=now, at=now, owner=owner)

    results = await asyncio.gather(
        *(claim(same, owner=f"p{i}") for i in range(25)),
        *(claim(s) for s in others),
        claim(paused),
        store.claim_run(same.id, "tg:someone-else", "2025-01-03", scheduled_for=now, at=now),
    )
    assert results[:25].count("claimed") == 1 and results[:25].count("duplicate") == 24
    assert results[25 : 25 + len(others)] == ["claimed"] * len(others)
    assert results[-2:] == ["missing", "missing"]  # paused; wrong chat for the schedule
    assert await claim(same) == "duplicate"  # later, too


async def test_daily_upkeep_prunes_trace_folders_past_the_retention(store, tmp_path):
    from tests.fakes.clock import FakeClock

    traces = tmp_path / "traces"
    for day in ("2025-01-01", "2025-01-17", "2025-01-18", "2025-02-01", "notes"):
        (traces / day).mkdir(parents=True)
    clock = FakeClock(datetime(2025, 2, 1, 12, tzinfo=UTC))
    a = app(store, clock=clock, traces_dir=traces, trace_retention_days=14)
    assert await a.run_housekeeping_now("prune_traces")
    assert sorted(p.name for p in traces.iterdir()) == ["2025-01-18", "2025-02-01", "notes"]
    clock.advance(86400 * 30)  # a month later every dated folder has aged out
    assert await a.run_housekeeping_now("prune_traces")
    assert sorted(p.name for p in traces.iterdir()) == ["notes"]


async def test_trace_pruning_is_registered_as_a_housekeeping_job(store, tmp_path):
    a = app(store, traces_dir=tmp_path)
    assert "prune_traces" in a._ctx.housekeeping
    assert "prune_traces" not in app(store)._ctx.housekeeping  # no traces folder, nothing to prune


async def test_cold_registration_stores_every_next_run_in_one_transaction(store):
    """10K briefs at a first start cost one INSERT batch of next run times, not 10K commits; each
    job runs from its trigger's next firing, and a restart builds the same jobs from what was
    stored, registering nothing anew."""
    from sqlalchemy import event

    schedules = [await make_schedule(store, chat=f"tg:{i}", spec=later_hhmm(UTC)) for i in range(40)]
    inserts: list[str] = []

    def seen(conn, cursor, statement, *args):
        if "scheduler_next_runs" in statement and statement.lstrip().upper().startswith("INSERT"):
            inserts.append(statement)

    event.listen(store.db.engine.sync_engine, "before_cursor_execute", seen)
    b = app(store)
    await b.start()
    try:
        assert b.last_reconcile is not None and b.last_reconcile.added == 40
        assert len(inserts) == 1  # one executemany for the 40 briefs
        for s in schedules:
            job = b._aps.get_job(s.job_id)
            assert job is not None and job.next_run_time is not None
            assert job.next_run_time == job.trigger.get_next_fire_time(None, datetime.now(UTC))
    finally:
        await b.stop()
    stored = await store.next_runs()
    c = app(store)
    await c.start()
    try:
        assert c.last_reconcile is not None and c.last_reconcile.added == 0
        for s in schedules:
            assert await c.next_run_time(s.job_id) == stored[s.job_id]
    finally:
        await c.stop()


async def test_briefs_fire_at_their_own_second_of_the_minute(store):
    """By default each brief job fires at its schedule's `spread_second`, so thousands of 08:30
    briefs spread over the minute."""
    from scheduler.specs import spread_second

    schedules = [await make_schedule(store, chat=f"tg:{i}", spec=later_hhmm(UTC)) for i in range(5)]
    a = app(store, spread_briefs=True)
    await a.start()
    try:
        for s in schedules:
            nxt = await a.next_run_time(s.job_id)
            assert nxt is not None and nxt.second == spread_second(s.id)
            assert f"{nxt:%H:%M}" == s.spec
    finally:
        await a.stop()


async def test_a_housekeeping_job_may_run_at_its_own_time_and_zone(store):
    """The data refreshes run after each market's close, not at the housekeeping hour."""

    async def refresh() -> str:
        return "ok"

    a = app(
        store,
        housekeeping={"refresh_cn": refresh, "cleanup_tasks": refresh},
        housekeeping_at="03:50",
        housekeeping_times={"refresh_cn": ("15:40", "Asia/Shanghai")},
    )
    await a.start()
    try:
        cn = a._aps.get_job("housekeeping:refresh_cn")
        other = a._aps.get_job("housekeeping:cleanup_tasks")
        fire = cn.next_run_time.astimezone(ZoneInfo("Asia/Shanghai"))
        assert (fire.hour, fire.minute) == (15, 40) and str(cn.trigger.zone) == "Asia/Shanghai"
        assert (other.trigger.hour, other.trigger.minute) != (15, 40)
    finally:
        await a.stop()


async def test_an_upgrade_keeps_the_next_run_times_the_job_store_held(tmp_path):
    """A database from before `scheduler_next_runs` (APScheduler's pickled jobs in
    `apscheduler_jobs`) keeps each job's next run time: a brief due during the upgrade still
    fires, once, and nothing is registered anew."""
    import sqlite3

    from memory.db import Database, upgrade

    url = f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
    await upgrade(url, "0014_column_limits")
    due = (datetime.now(UTC) - timedelta(minutes=2)).replace(second=0, microsecond=0)
    con = sqlite3.connect(tmp_path / "old.db")
    with con:
        con.execute(
            "INSERT INTO schedules (id, chat_key, kind, spec, tz, paused, created_by, created_at, "
            "updated_at, last_status, last_error, consecutive_failures) "
            "VALUES ('sch_old', 'tg:1', 'brief', ?, 'UTC', 0, '', ?, ?, '', '', 0)",
            (f"{due:%H:%M}", due.isoformat(), due.isoformat()),
        )
        con.execute(
            "INSERT INTO apscheduler_jobs (id, next_run_time, job_state) VALUES ('brief:sch_old', ?, ?)",
            (due.timestamp(), b"pickled job"),
        )
    con.close()
    await upgrade(url)

    db = Database(url)
    await db.start()
    try:
        from scheduler.store import ScheduleStore

        store = ScheduleStore(db)
        assert await store.next_runs() == {"brief:sch_old": due}
        rec = Recorder()
        a = app(store, on_brief=rec)
        await a.start()
        try:
            await eventually(lambda: _finished(store, "sch_old", due.date().isoformat()))
            assert rec.calls == [("tg:1", "sch_old")]
            assert a.last_reconcile is not None and a.last_reconcile.added == 0
        finally:
            await a.stop()
    finally:
        await db.close()


async def test_the_holder_follows_schedules_changed_through_a_standby(store, clock):
    """One source of truth: a schedule created, paused or resumed through another process is
    picked up by the lease holder at its next renewal, from the schedules table alone."""
    a = app(store, clock=clock, owner_id="proc-a", renew_interval=0.02)
    b = app(store, clock=clock, owner_id="proc-b", renew_interval=0.02)
    await a.start()
    await b.start()
    try:
        assert a.is_leader and not b.is_leader
        via_b = ScheduleService(store, b)
        s = await via_b.create("tg:1", f"{later_hhmm(UTC)} UTC")
        await eventually(lambda: a._aps.get_job(s.job_id) is not None)
        assert await a.next_run_time(s.job_id) == await b.next_run_time(s.job_id)
        clock.advance(1)
        await via_b.pause("tg:1", s.id)
        await eventually(lambda: a._aps.get_job(s.job_id) is None)
        clock.advance(1)
        await via_b.resume("tg:1", s.id)
        await eventually(lambda: a._aps.get_job(s.job_id) is not None)
    finally:
        await a.stop()
        await b.stop()
