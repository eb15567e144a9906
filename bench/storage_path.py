"""The store's cost per chat message, alone: the calls one Telegram message makes on a SQLite file.

What the bot does with the database for one message (counted through the whole front door,
`bench/chat_throughput.py`, 20 chats × 5 messages): the inbound record (`receive_message`), the
open-turn check, the history load, the memory/TaskState probe, and two commits (the user's
message with the running turn; the answer with the finished turn, its usage row and the inbound
record cleared). Here they run directly against `SqlStore` and `MemoryRecall` on a temporary
SQLite file (WAL, as `tapebot run` opens it), `--chats` chats interleaved, `--messages` messages
each, so histories grow as in a conversation. Prints the median over runs of wall time and
process CPU per message.

The budget it is measured against: Telegram lets a bot send ~30 messages/s (33 ms each) and one
per second per chat, and a model turn takes 1–5 s; a storage cost is worth hand-written SQL only
when it is a noticeable share of that.

Measured 2026-12-06, a shared 2-core machine (load average 3.5–3.9), 50 chats × 10 messages, five
runs each, interleaved: the hand-written sqlite3 twin of the Core queries (since retired) 0.21 and
0.24 ms CPU per message (wall 0.21, 0.26 ms); every query once in Core, `Database.run` on a
pysqlite engine on the loop thread, 1.41 and 1.38 ms CPU (wall 2.24, 1.49 ms). The difference,
~1.2 ms, is 3.5% of the 33 ms a message has at Telegram's rate limit and 0.1% of a 1 s model turn.
The same Core through aiosqlite for every transaction (a thread hand-off per call): 6.7–7.2 ms CPU,
15–17 ms wall per message (load 6–8), a fifth of that budget — why `Database.run` stays off it.

Run: python bench/storage_path.py [--chats 50] [--messages 10] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.messages import Message
from agent.ports import TurnRecord, UsageRecord
from agent.usage import Usage
from bench._env import add_runs_arg, footer, header, spread
from memory.db import Database
from memory.longterm import MemoryStore
from memory.recall import MemoryRecall
from memory.stores import SqlStore
from memory.taskstate import TaskStateStore


async def one_message(store: SqlStore, recall: MemoryRecall, chat: int, n: int) -> None:
    session_id, chat_key = f"s{chat}", f"telegram:{chat}"
    update_id = chat * 1000 + n
    text = f"message {n}: how is AAPL doing against its 50-day average?"
    assert await store.receive_message("telegram", update_id, {"text": text, "chat": chat_key})
    await store.open_turn(session_id)
    await store.load_messages(session_id)
    await recall._probe(chat_key, session_id)
    turn = TurnRecord(id=f"t{chat}-{n}", session_id=session_id, requester=f"u{chat}", chat_key=chat_key)
    await store.commit(session_id, messages=[Message.user(text)], turn=turn)
    done = turn.model_copy(update={"status": "done", "rounds": 1})
    usage = UsageRecord(
        session_id=session_id,
        turn_id=turn.id,
        model="bench-model",
        usage=Usage(1200, 180, 900, 0),
        cost=0.0021,
    )
    answer = Message.assistant("AAPL closed 2.1% above its 50-day average; volume was light. " * 3)
    await store.commit(
        session_id, messages=[answer], turn=done, usage=usage, received=[("telegram", str(update_id))]
    )


async def run_once(chats: int, messages: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite+aiosqlite:///{tmp}/bench.db")
        await db.start()
        try:
            store = SqlStore(db)
            recall = MemoryRecall(MemoryStore(db), taskstates=TaskStateStore(db))
            wall, cpu = time.perf_counter(), time.process_time()
            for n in range(messages):
                # chats at once, as the bot serves them: one message of each chat in flight
                await asyncio.gather(*(one_message(store, recall, c, n) for c in range(chats)))
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        finally:
            await db.close()
    total = chats * messages
    return wall / total, cpu / total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chats", type=int, default=50)
    ap.add_argument("--messages", type=int, default=10)
    add_runs_arg(ap)
    a = ap.parse_args()
    header(
        "storage path: one chat message's store calls on SQLite (receive, turn, history, probe, 2 commits)"
    )
    print(f"chats={a.chats} messages/chat={a.messages} runs={a.runs}")
    walls, cpus = [], []
    for _ in range(a.runs):
        w, c = asyncio.run(run_once(a.chats, a.messages))
        walls.append(w)
        cpus.append(c)
    walls.sort()
    cpus.sort()
    print(f"wall per message   median {walls[len(walls) // 2] * 1000:.3f} ms  {spread(walls, 1000, ' ms')}")
    print(f"CPU per message    median {cpus[len(cpus) // 2] * 1000:.3f} ms  {spread(cpus, 1000, ' ms')}")
    print("budget per message: 33 ms at Telegram's 30 messages/s per bot; a model turn 1000–5000 ms")
    footer()


if __name__ == "__main__":
    main()
