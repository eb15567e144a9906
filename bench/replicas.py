"""Several `tapebot run` replicas as one bot, measured.

N replicas (real `tapebot run` processes, default 1, 2 and 3 in turn) on one PostgreSQL database,
behind a round-robin webhook forwarder (tests/bot/replica_cluster.py), with the fake Telegram Bot
API and the scripted LLM server answering after `--model-delay` (100 ms). Each of `--chats` chats
(200) sends `--per-chat` messages (5), `--gap` seconds apart, without waiting for the answers;
once `--kill-at` of them have been sent, replica 0 is killed -9 and restarted `--down` seconds
later; for 2 and 3 replicas the run is repeated with the killed replica left down (its chats are
taken over by the survivors once its leases expire, `--lease`). Then `--approvals` chats ask for a file and tap the card's button twice, on two replicas;
and `--briefs` chats have a brief due in the same minute.

Prints, per N: messages/s (all messages over the time from the first sent to the last answered)
and the p95 latency from a message's hand-over to the first answer naming it; lost, answered
twice, out of order (all must be 0), the approved tools' runs (one each) and the briefs sent (one
each) — and the machine's load (bench/_env.py). Each replica keeps Telegram's flood limiter, as in
production. The run is FAIL if any of those counts is off.

    TAPEBOT_TEST_POSTGRES_URL=postgresql+asyncpg://postgres@127.0.0.1:5432/tapebot_bench \\
        python -m bench.replicas [--replicas 1,2,3] [--chats 200] [--per-chat 5]

The database named by the URL is emptied (DROP SCHEMA public CASCADE) before each run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench._env import footer, header, load_line
from tests.bot.replica_cluster import Cluster, converse, report

BRIEF = re.compile(r"BRIEF\[\]")


async def plant_briefs(cluster: Cluster, count: int) -> datetime:
    """`count` chats with a brief due in the same minute, 3–4 minutes from now: after the killed
    replica is back (a restart takes up to a minute on a busy machine), so the briefs are due
    while every replica runs, not caught up after a restart. Their rows are written as if they
    had spoken."""
    from memory.chat_tables import ChatRecord
    from memory.db import Database
    from memory.stores import SqlStore
    from scheduler.store import Schedule, ScheduleStore

    due = (datetime.now(UTC) + timedelta(seconds=240)).replace(second=0, microsecond=0)
    db = Database(cluster.db_url)
    await db.start()
    try:
        store, schedules = SqlStore(db), ScheduleStore(db)
        now = datetime.now(UTC)
        for chat in cluster.chat_ids[-count:]:
            key = f"telegram:{chat}"
            await store.save_chat(
                ChatRecord(key, "telegram", str(chat), None, False, f"{key}#b", "en", None, str(chat))
            )
            await schedules.create_schedule(
                Schedule(id=f"sch_b{chat}", chat_key=key, spec=due.strftime("%H:%M"), tz="UTC",
                         created_by=str(chat), created_at=now, updated_at=now)
            )  # fmt: skip
    finally:
        await db.close()
    return due


async def one(n: int, args: argparse.Namespace, url: str, *, restart: bool = True) -> bool:
    with tempfile.TemporaryDirectory(prefix="tapebot-replicas-") as tmp:
        cluster = Cluster(
            Path(tmp), url, n, chats=args.chats, model_delay=args.model_delay, lease_s=args.lease
        )
        cluster.scheduler = args.briefs > 0
        async with cluster:
            due = await plant_briefs(cluster, args.briefs) if args.briefs else None
            kill_at = int(args.chats * args.per_chat * args.kill_at) if args.kill_at > 0 else None
            how = "restarted" if restart else "not restarted"
            print(f"   {n} replica(s), replica 0 killed -9 and {how}: {load_line()}", flush=True)
            o = await converse(
                cluster, per_chat=args.per_chat, gap=args.gap, kill_after=kill_at,
                down_for=args.down if restart else None,
                approvals=args.approvals, timeout=args.timeout,
                on_messages=lambda o: print(f"   {report(f'{n} replica(s), messages', o)}", flush=True),
            )  # fmt: skip
            briefs: dict[int, int] = {}
            if due is not None:
                wait = (due - datetime.now(UTC)).total_seconds() + 30
                if wait > 0:
                    await asyncio.sleep(wait)
                await cluster.api.wait_for(
                    lambda: all(any(BRIEF.search(t) for t in cluster.api.texts(c)) for c in cluster.chat_ids[-args.briefs:]),
                    timeout=args.timeout,
                )  # fmt: skip
                await asyncio.sleep(2)
                briefs = {
                    c: sum(bool(BRIEF.search(t)) for t in cluster.api.texts(c))
                    for c in cluster.chat_ids[-args.briefs :]
                }
        print(f"   {report(f'{n} replica(s)', o)}")
        ok = not (o.lost or o.twice or o.out_of_order)
        if args.approvals:
            runs = sorted(o.tool_runs.values())
            once = runs == [1] * args.approvals and all(v == 1 for v in o.wrote.values())
            print(
                f"     approvals tapped twice on two replicas: tool runs {runs} — {'once each' if once else 'NOT once'}"
            )
            ok = ok and once
        if briefs:
            sent = sorted(set(briefs.values()))
            print(f"     briefs due at {due:%H:%M} UTC in {len(briefs)} chats: sent {sent} per chat")
            ok = ok and sent == [1]
        print(
            f"     {'PASS' if ok else 'FAIL'}"
            + (f": lost {o.lost[:5]} twice {o.twice[:5]} order {o.out_of_order[:5]}" if not ok else "")
        )
        return ok


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--replicas", default="1,2,3")
    p.add_argument("--chats", type=int, default=200)
    p.add_argument("--per-chat", type=int, default=5)
    p.add_argument("--gap", type=float, default=0.3, help="seconds between one chat's messages")
    p.add_argument("--model-delay", type=float, default=0.1)
    p.add_argument(
        "--kill-at", type=float, default=0.4, help="share of messages sent before the kill -9 (0: none)"
    )
    p.add_argument("--down", type=float, default=2.0, help="seconds before the killed replica restarts")
    p.add_argument("--lease", type=float, default=15.0, help="chat lease (TAPEBOT_CHAT_LEASE_S)")
    p.add_argument(
        "--restarted-only", action="store_true", help="skip the runs where the killed replica stays down"
    )
    p.add_argument("--approvals", type=int, default=5)
    p.add_argument("--briefs", type=int, default=5)
    p.add_argument("--timeout", type=float, default=900.0, help="seconds each phase may take")
    p.add_argument("--db", default=os.environ.get("TAPEBOT_TEST_POSTGRES_URL", ""))
    args = p.parse_args()
    if not args.db:
        print(
            "set TAPEBOT_TEST_POSTGRES_URL (or --db) to a PostgreSQL database this bench may empty",
            file=sys.stderr,
        )
        return 2
    header(
        f"replicas: {args.chats} chats × {args.per_chat} messages, model {args.model_delay * 1000:.0f} ms, kill -9 at {args.kill_at:.0%}"
    )
    started = time.monotonic()
    results = []
    runs = [(int(n), True) for n in args.replicas.split(",")]
    if args.kill_at > 0 and not args.restarted_only:  # and with no restart: survivors take over
        runs += [(n, False) for n, _ in runs if n > 1]
    for n, restart in runs:
        try:
            results.append(asyncio.run(one(n, args, args.db, restart=restart)))
        except AssertionError as exc:  # a phase did not finish in time: say so, go on
            print(f"     FAIL: {str(exc)[:300]}")
            results.append(False)
    print(f"   wall time {time.monotonic() - started:.0f} s")
    footer()
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
