"""Scheduler at scale: 10,000 chats with daily briefs on a real SQLite file.

1. Cold registration: 10k schedule rows, first start → reconcile writes 10k jobs to the job store.
2. Warm start ("load the schedule at start-up"): a restart on the same file — lease, reconcile
   (ids only), and the first scheduling pass over the job store.
3. Firing lateness with an instant brief: every job's next run is set a few seconds ahead, spread
   over a window; lateness = on_brief start − scheduled time (includes our run claim). p50/p99/max.
4. The same with all jobs due in the same second (everyone picks 08:30).

Prints figures; asserts nothing. Bounded in time. Target: p99 lateness under 1 s (spread case).
Run: python bench/scheduler_scale.py [--chats 10000] [--window 30]
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

from memory.db import Database
from memory.tasks import ScheduleRow, create_tables
from scheduler.app import AppScheduler
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
        await s.execute(ScheduleRow.__table__.insert(), rows)
    return [r["id"] for r in rows]


async def stage(app: AppScheduler, store: ScheduleStore, ids: list[str], times: list[datetime]) -> None:
    """Point every job's next run at `times[i]` (one I/O-thread call)."""
    schedules = {s.id: s for s in await store.list_schedules()}
    wanted = [(schedules[sid], t) for sid, t in zip(ids, times, strict=True)]

    def apply() -> None:
        for s, t in wanted:
            app._aps.modify_job(s.job_id, next_run_time=t)

    await app._call(apply)


async def measure_firing(app: AppScheduler, store: ScheduleStore, ids: list[str], times: list[datetime], fired: dict, timeout: float) -> list[float]:
    fired.clear()
    expected = dict(zip(ids, times, strict=True))
    fired["expected"] = expected
    fired["lateness"] = []
    await stage(app, store, ids, times)
    deadline = time.monotonic() + timeout
    while len(fired["lateness"]) < len(ids) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return list(fired["lateness"])


async def main(n: int, window: float) -> None:
    logging.basicConfig(level=logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite+aiosqlite:///{Path(tmp) / 'tapebot.db'}", migrate=False)
        await db.start()
        await create_tables(db.engine)
        store = ScheduleStore(db)
        t = time.perf_counter()
        ids = await seed(db, n)
        print(f"chats with a daily brief:         {n:,}  (rows inserted in {time.perf_counter() - t:.2f} s)")

        first = AppScheduler(store, retry_delays=())
        t = time.perf_counter()
        await first.start()
        await first._call(lambda: None)  # wait for the first scheduling pass too
        cold = time.perf_counter() - t
        print(f"cold start (register {first.last_reconcile.added:,} jobs):  {cold:.2f} s")
        await first.stop()

        fired: dict = {}

        async def on_brief(chat_key: str, schedule_id: str) -> None:
            when = fired["expected"].get(schedule_id)
            if when is not None:
                fired["lateness"].append(datetime.now(UTC).timestamp() - when.timestamp())

        app = AppScheduler(store, on_brief=on_brief, retry_delays=(), brief_grace_time=3600)
        t = time.perf_counter()
        await app.start()
        await app._call(lambda: None)
        warm = time.perf_counter() - t
        print(f"warm start (load the schedule):   {warm:.2f} s  (jobs added: {app.last_reconcile.added})")

        # spread: due from now+lead over `window` seconds
        lead = 3.0 + n / 5000  # room for staging the next-run times
        start = datetime.now(UTC) + timedelta(seconds=lead)
        times = [start + timedelta(seconds=window * i / n) for i in range(n)]
        lat = await measure_firing(app, store, ids, times, fired, timeout=lead + window + 60)
        report("spread over %.0f s" % window, n, lat)

        # burst: all due in the same second (a fresh day, so the run claims are new)
        await db_clear_runs(db)
        start = datetime.now(UTC) + timedelta(seconds=lead)
        lat = await measure_firing(app, store, ids, [start] * n, fired, timeout=lead + 120)
        report("all due at once", n, lat)

        await app.stop()
        await db.close()


async def db_clear_runs(db: Database) -> None:
    from memory.tasks import ScheduleRunRow

    async with db.session() as s:
        await s.execute(ScheduleRunRow.__table__.delete())


def report(label: str, n: int, lat: list[float]) -> None:
    if not lat:
        print(f"lateness ({label}): nothing fired")
        return
    print(
        f"lateness ({label}): fired {len(lat):,}/{n:,}  "
        f"p50 {statistics.median(lat) * 1000:.0f} ms  p99 {pct(lat, 0.99) * 1000:.0f} ms  max {max(lat) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--chats", type=int, default=10_000)
    parser.add_argument("--window", type=float, default=30.0)
    args = parser.parse_args()
    asyncio.run(main(args.chats, args.window))
