"""A chat's turns run one at a time across replicas, in arrival order: the chat lease and inbox
(bot/replicas.py `ChatLeases`, memory/replica_inbox.py) on a real database — a SQLite file, and
PostgreSQL when TAPEBOT_TEST_POSTGRES_URL is set — with each replica on its own connection pool,
as separate processes are."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.replicas import ChatLeases, chat_lease_name
from memory.coordination import Leases
from memory.db import Database
from memory.replica_inbox import ReplicaInbox
from memory.stores import SqlStore


@pytest.fixture
async def pools(database_url):
    """Three replicas' connection pools on one database."""
    dbs = [Database(database_url) for _ in range(3)]
    for db in dbs:
        await db.start()
    yield dbs
    for db in dbs:
        await db.close()


def replica(db: Database, owner: str, ttl: float = 5) -> ChatLeases:
    return ChatLeases(Leases(db), ReplicaInbox(db, owner), ttl=ttl, max_wait_step=0.02)


async def receive(db: Database, chat: str, update_id: int, text: str) -> tuple[str, str]:
    """What the router does with a message that may queue: store it, file it under its chat."""
    receipt = ("telegram", str(update_id))
    assert await SqlStore(db).receive_message(*receipt, {"text": text})
    await ReplicaInbox(db, "filer").file(chat, receipt)
    return receipt


async def test_one_chat_is_held_by_one_replica_at_a_time(pools):
    """Three replicas run turns in one chat: never two at once, each gets its turn (the chat is
    let go when the lane is idle), and another chat is not held up meanwhile."""
    replicas = [replica(db, f"replica-{i}") for i, db in enumerate(pools)]
    inside: list[str] = []
    overlaps: list[tuple[str, ...]] = []
    order: list[str] = []

    async def turn(lease: ChatLeases, chat: str) -> None:
        async with lease.hold(chat):
            inside.append(lease.owner)
            if len(inside) > 1:
                overlaps.append(tuple(inside))
            order.append(lease.owner)
            for _ in range(5):  # a turn's awaits: others get to try meanwhile
                await asyncio.sleep(0.01)
            inside.remove(lease.owner)
        assert await lease.let_go(chat)

    async def lane(lease: ChatLeases) -> None:  # in one replica the chat's lane runs turns in turn
        for _ in range(3):
            await turn(lease, "telegram:5")

    await asyncio.gather(*(lane(r) for r in replicas))
    assert overlaps == []
    assert sorted(order) == sorted([r.owner for r in replicas] * 3)

    assert await replicas[0].take("telegram:5")
    assert await asyncio.wait_for(replicas[1].wait_take("telegram:6"), 30)  # another chat: free
    assert not await replicas[1].take("telegram:5")
    assert not await replicas[1].wait_take("telegram:5", timeout=0.2)


async def test_the_holder_takes_up_every_message_in_arrival_order_before_letting_go(pools):
    """Messages another replica received while this one held the chat keep the chat here: it
    cannot let go until it has taken them, oldest first; then the chat is free."""
    a, b = replica(pools[0], "a"), replica(pools[1], "b")
    assert await a.take("telegram:7")
    first = await receive(pools[0], "telegram:7", 1, "m1")
    assert [w.receipt for w in await a.untaken("telegram:7")] == [first]
    second = await receive(pools[1], "telegram:7", 2, "m2")
    third = await receive(pools[1], "telegram:7", 3, "m3")
    assert not await b.take("telegram:7")  # b received them but a runs the chat
    assert not await a.let_go("telegram:7")  # m2 and m3 wait: a keeps the chat
    assert [w.receipt for w in await a.untaken("telegram:7")] == [second, third]
    assert await a.untaken("telegram:7") == []  # taken once
    assert await a.let_go("telegram:7")
    assert await b.take("telegram:7")
    # b holds it now: what a took is not b's, and the messages still wait (not in a history)
    assert [w.receipt for w in await b.untaken("telegram:7")] == [first, second, third]
    await SqlStore(pools[1]).release_received([first, second, third])
    assert await b.let_go("telegram:7")


async def test_a_dead_holders_chat_is_taken_over_and_said_so(pools):
    """A holder that died mid-turn (kill -9) does not block the chat for good: its lease is taken
    when it expires, or at once when its process is known gone on this machine — and the taker
    is told once, to resume what the dead one left; the sweep finds such chats."""
    leases = Leases(pools[0])
    now = datetime.now(UTC)
    await leases.take(
        chat_lease_name("telegram:1"), "elsewhere:1:1:ab", now=now, ttl=0.3, subject="telegram:1"
    )
    survivor = replica(pools[1], "survivor")
    await asyncio.sleep(0.4)
    assert await survivor.inbox.orphaned_chats(now=datetime.now(UTC), stranded_after=5) == ["telegram:1"]
    async with survivor.hold("telegram:1"):
        pass  # taken once the dead one's 0.3 s ran out
    assert survivor.taken_over("telegram:1")
    assert not survivor.taken_over("telegram:1")
    assert await survivor.inbox.orphaned_chats(now=datetime.now(UTC), stranded_after=5) == []

    code = "from bot.replicas import new_replica_id; print(new_replica_id())"
    dead = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    await leases.take(chat_lease_name("telegram:2"), dead, now=now, ttl=timedelta(hours=1).total_seconds())
    assert await survivor.take("telegram:2")  # at once: the holder's process is gone
    assert survivor.taken_over("telegram:2")

    fresh = replica(pools[2], "fresh")
    assert await fresh.take("telegram:3")  # nobody held it: nothing to take over
    assert not fresh.taken_over("telegram:3")


async def test_a_stranded_message_is_found_and_a_live_replicas_is_not(pools):
    """A message filed whose receiver died before taking its chat is found by the sweep once it
    has waited `stranded_after`; a chat a live replica holds never is."""
    await receive(pools[0], "telegram:20", 20, "lonely")
    await receive(pools[0], "telegram:21", 21, "held")
    live = replica(pools[1], "live", ttl=60)
    assert await live.take("telegram:21")
    later = datetime.now(UTC) + timedelta(seconds=10)
    assert await live.inbox.orphaned_chats(now=later, stranded_after=5) == ["telegram:20"]
    assert await live.inbox.orphaned_chats(now=datetime.now(UTC), stranded_after=5) == []


async def test_tasks_of_one_replica_taking_a_new_chat_at_once_all_hold_it(pools):
    """Several tasks of one replica (a message's handler, the sweep, a lane) take a chat nobody
    held, at once: each is told it holds it — none reports "another process" and wipes what
    this replica took (which would take a message up twice)."""
    r = replica(pools[0], "r")
    for i in range(10):
        key = f"telegram:{100 + i}"
        assert all(await asyncio.gather(*(r.take(key) for _ in range(4))))
        assert key in r.held


def test_lease_names_fit_the_column():
    """Chat keys are up to 255 characters; the lease name column holds 64."""
    assert len(chat_lease_name("telegram:" + "9" * 250)) <= 64
    assert chat_lease_name("a") != chat_lease_name("b")


STEP = st.tuples(st.integers(0, 1), st.sampled_from(["receive", "work", "idle"]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=30))
async def test_property_every_message_is_answered_once_in_order_by_one_holder(tmp_path_factory, steps):
    """Two replicas receive one chat's messages in any interleaving with their turns and their
    attempts to let the chat go: at no point do two hold it; once both are idle every message
    was answered exactly once, in the order it arrived."""
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('prop') / 'tapebot.db'}"
    dbs = [Database(url), Database(url)]
    for db in dbs:
        await db.start()
    try:
        replicas = [replica(db, f"r{i}") for i, db in enumerate(dbs)]
        chat, answered, queued = "telegram:1", [], {0: [], 1: []}
        n = 0

        async def work(i: int) -> None:  # the holder's lane: takes its untaken messages, answers them
            r = replicas[i]
            if chat not in r.held:
                return
            queued[i] += [w.record["text"] for w in await r.untaken(chat)]
            for text in queued[i]:
                answered.append(text)
                await SqlStore(dbs[i]).release_received([("telegram", text)])
            queued[i] = []

        async def idle(i: int) -> None:  # the lane went idle: let go, or take up what waits
            if chat in replicas[i].held and not await replicas[i].let_go(chat):
                await work(i)

        for i, op in steps:
            if op == "receive":
                n += 1
                await receive(dbs[i], chat, n, str(n))
                await replicas[i].take(chat)  # may fail: the holder takes it up
            elif op == "work":
                await work(i)
            else:
                await idle(i)
            assert sum(chat in r.held for r in replicas) <= 1
        for _ in range(4):  # both lanes run out of work
            for i in (0, 1):
                await work(i)
                await idle(i)
        assert answered == [str(k) for k in range(1, n + 1)]
    finally:
        for db in dbs:
            await db.close()
