"""Scheduler at scale: 10,000 chats with daily briefs on a real SQLite file.

1. Cold registration: 10k schedule rows; the first start's reconcile builds 10k jobs and stores
   their next run times.
2. Warm start ("load the schedule at start-up"): a restart on the same file — lease, reconcile
   (the schedules and their stored next run times into APScheduler's jobs) and the first pass.
3. Firing lateness with an instant brief: every job's next run is set a few seconds ahead, spread
   over a window. Lateness is measured at job start (APScheduler hands the job to us) and at
   `on_brief` (after our run claim), from the scheduled time. p50 / p99 / max.
4. Everyone picked the same minute (08:30): each job is staged at that minute plus its schedule's
   `spread_second` (what the scheduler does: briefs spread over their minute, README "Scheduled
   briefs"), lateness measured from that instant. `--unspread` stages all 10k in the same second
   instead (the behaviour before spreading) for comparison.

Cold registration is the median of `--runs` fresh databases; the firing rounds (3 and 4) are each
repeated `--runs` times and the median of their p99s printed.
Prints figures; asserts nothing; bounded in time. Targets: cold registration of 10K jobs < 2 s;
p99 lateness < 1 s, also with all 10K picking the same minute (spread over it, as the scheduler does).
Run: python bench/scheduler_scale.py [--chats 10000] [--window 30] [--runs 5] [--unspread]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._env import add_runs_arg, footer, header, spread
from memory.db import Database
from memory.tasks import SCHEDULE_RUNS, SCHEDULES, create_tables
from scheduler import jobs
from scheduler.app_scheduler import AppScheduler
from scheduler.specs import spread_second
from scheduler.store import ScheduleStore


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def seed(db: Database, n: int) -> list[str]:
    now = datetime.now(UTC)
    zones = ["Asia/Shanghai", "America/New_York", "Europe/London", "UTC"]
    rows = [
        {
            "id": f"sch_{i:08x}",
            "chat_key": f"tg:{100000 + i}",
            "kind": "brief",
            "spec": ("trading_days " if i % 3 == 0 else "") + f"{6 + i % 4:02d}:{(i * 7) % 60:02d}",
            "tz": zones[i % len(zones)],
            "paused": False,
            "created_by": "bench",
            "created_at": now,
            "updated_at": now,
            "last_status": "",
            "last_error": "",
            "consecutive_failures": 0,
        }
        for i in range(n)
    ]
    async with db.session() as s:
        await s.execute(SCHEDULES.insert(), rows)
    return [r["id"] for r in rows]


class Probe:
    """Records lateness at job start and at on_brief for the jobs of the current round."""

    def __init__(self) -> None:
        self.expected: dict[str, float] = {}
        self.started: list[float] = []
        self.briefed: list[float] = []

    def reset(self, expected: dict[str, datetime]) -> None:
        self.expected = {k: v.timestamp() for k, v in expected.items()}
        self.started, self.briefed = [], []

    def late(self, schedule_id: str) -> float | None:
        when = self.expected.get(schedule_id)
        return None if when is None else time.time() - when

    async def on_brief(self, chat_key: str, schedule_id: str) -> None:  # the "instant brief"
        late = self.late(schedule_id)
        if late is not None:
            self.briefed.append(late)


async def stage(app: AppScheduler, wanted: dict[str, datetime]) -> float:
    """Point each job's next run at its time, through APScheduler's API while it is paused (the
    bench reaches into the AppScheduler for its APScheduler). Returns the seconds it took."""
    aps = app._aps
    assert aps is not None
    t = time.perf_counter()
    aps.pause()
    for sid, when in wanted.items():
        aps.modify_job(f"brief:{sid}", next_run_time=when)
    aps.resume()
    return time.perf_counter() - t


async def fire_round(app: AppScheduler, probe: Probe, wanted: dict[str, datetime], timeout: float) -> float:
    probe.reset(wanted)
    staged = await stage(app, wanted)
    deadline = time.monotonic() + timeout
    while len(probe.briefed) < len(wanted) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return staged


def report(label: str, n: int, values: list[float]) -> None:
    if not values:
        print(f"  {label}: nothing fired")
        return
    print(
        f"  {label:<22} fired {len(values):,}/{n:,}  p50 {statistics.median(values) * 1000:6.0f} ms"
        f"  p99 {pct(values, 0.99) * 1000:6.0f} ms  max {max(values) * 1000:6.0f} ms"
    )


def summary(label: str, p99s: list[float]) -> None:
    """The median over the rounds of each round's p99."""
    if p99s:
        print(
            f"  {label:<22} median p99 of {len(p99s)} rounds: {statistics.median(p99s) * 1000:6.0f} ms "
            f"{spread(p99s, 1000, ' ms')}"
        )


async def cold_registration(n: int) -> float:
    """Seconds for a first start to register `n` jobs (fresh database)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite+aiosqlite:///{Path(tmp) / 'tapebot.db'}", migrate=False)
        await db.start()
        await create_tables(db.engine)
        await seed(db, n)
        first = AppScheduler(ScheduleStore(db), retry_delays=())
        t = time.perf_counter()
        await first.start()
        await asyncio.sleep(0)  # include the first scheduling pass
        took = time.perf_counter() - t
        added = first.last_reconcile.added
        await first.stop()
        await db.close()
    print(f"  cold start registered {added:,} jobs in {took:.2f} s")
    return took


async def main(n: int, window: float, runs: int, unspread: bool = False) -> None:
    logging.basicConfig(level=logging.ERROR)
    header(f"scheduler at scale: {n:,} daily briefs")
    cold = [await cold_registration(n) for _ in range(runs)]
    print(f"cold registration of {n:,} jobs: median {statistics.median(cold):.2f} s {spread(cold, 1, ' s')}")
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite+aiosqlite:///{Path(tmp) / 'tapebot.db'}", migrate=False)
        await db.start()
        await create_tables(db.engine)
        store = ScheduleStore(db)
        ids = await seed(db, n)
        first = AppScheduler(store, retry_delays=())  # registers the jobs (cold, measured above)
        await first.start()
        await asyncio.sleep(0)
        await first.stop()

        probe = Probe()
        real_execute = jobs.execute_brief

        async def timed_execute(ctx, chat_key, schedule_id, **kw):  # job start, before our run claim
            late = probe.late(schedule_id)
            if late is not None:
                probe.started.append(late)
            return await real_execute(ctx, chat_key, schedule_id, **kw)

        jobs.execute_brief = timed_execute  # type: ignore[assignment]
        app = AppScheduler(store, on_brief=probe.on_brief, retry_delays=(), brief_grace_time=3600)
        t = time.perf_counter()
        await app.start()
        await asyncio.sleep(0)
        print(
            f"warm start, loading the schedule: {time.perf_counter() - t:.2f} s (jobs added: {app.last_reconcile.added})"
        )

        lead = 5.0
        rounds: dict[str, list[float]] = {"spread": [], "same second": []}
        for r in range(runs):
            async with db.session() as s:  # a fresh day for the run claims
                await s.execute(SCHEDULE_RUNS.delete())
            start = datetime.now(UTC) + timedelta(seconds=lead)
            wanted = {sid: start + timedelta(seconds=window * i / n) for i, sid in enumerate(ids)}
            staged = await fire_round(app, probe, wanted, timeout=lead + window + 60)
            print(
                f"round {r + 1}: due over {window:.0f} s (staged in {staged:.2f} s, first due after {lead:.0f} s):"
            )
            report("at job start", n, probe.started)
            report("at on_brief", n, probe.briefed)
            rounds["spread"].append(pct(probe.briefed, 0.99) if len(probe.briefed) == n else float("inf"))

            async with db.session() as s:
                await s.execute(SCHEDULE_RUNS.delete())
            start = (datetime.now(UTC) + timedelta(seconds=lead)).replace(microsecond=0)
            if unspread:
                wanted = dict.fromkeys(ids, start)
                what = "all due in the same second (no spreading)"
            else:
                wanted = {sid: start + timedelta(seconds=spread_second(sid)) for sid in ids}
                what = "all picked the same minute, spread by schedule over it"
            staged = await fire_round(app, probe, wanted, timeout=lead + 180)
            print(f"round {r + 1}: {n:,} {what} (staged in {staged:.2f} s):")
            report("at job start", n, probe.started)
            report("at on_brief", n, probe.briefed)
            rounds["same second"].append(
                pct(probe.briefed, 0.99) if len(probe.briefed) == n else float("inf")
            )

        print("lateness at on_brief (inf: a round did not fire every brief in time):")
        summary(f"due over {window:.0f} s", rounds["spread"])
        summary("same minute, spread" if not unspread else "same second", rounds["same second"])
        await app.stop()
        await db.close()
    footer()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--chats", type=int, default=10_000)
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--unspread", action="store_true", help="stage round 4 all in one second")
    add_runs_arg(parser)
    args = parser.parse_args()
    asyncio.run(main(args.chats, args.window, args.runs, args.unspread))
