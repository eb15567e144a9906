"""memory.stores.SqlStore against real SQLite files: messages, turns, approvals (CAS),
usage totals, inbound de-duplication, sessions and kv."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from agent.messages import Message, ThinkingPart, ToolCallPart
from agent.ports import ApprovalRecord, PlanStep, TurnRecord, UsageRecord, WaitingState, args_hash
from agent.usage import Usage
from memory.db import Database
from memory.stores import SqlStore


@pytest.fixture
async def store(database_url):
    async with Database(database_url) as db:
        yield SqlStore(db)


def conversation() -> list[Message]:
    call = ToolCallPart(id="c1", name="analyze_stock", arguments={"code": "600519", "days": 250})
    bad = ToolCallPart(id="c2", name="portfolio", arguments=None, raw_arguments="{not json")
    return [
        Message.user("分析一下 600519 贵州茅台", source="telegram"),
        Message.assistant(
            "Looking.", tool_calls=[call, bad], thinking=[ThinkingPart(text="hmm", signature="sig")]
        ),
        Message.tool_result("c1", "analyze_stock", '{"phase": "B"}'),
        Message.tool_result("c2", "portfolio", "invalid arguments", is_error=True),
        Message.assistant("Phase B, accumulation."),
    ]


# ---- messages ----------------------------------------------------------------------------------
async def test_messages_round_trip_exactly(store):
    msgs = conversation()
    await store.append_messages("s1", msgs[:2])
    await store.append_messages("s1", msgs[2:])
    assert await store.load_messages("s1") == msgs
    assert await store.load_messages("other") == []


async def test_replace_and_clear(store):
    await store.append_messages("s1", conversation())
    summary = [Message.user("[summary] earlier talk", archive_ref="archive://s1/1"), Message.assistant("ok")]
    await store.replace_messages("s1", summary)
    assert await store.load_messages("s1") == summary
    await store.append_messages("s1", [Message.user("next")])
    assert [m.text for m in await store.load_messages("s1")] == ["[summary] earlier talk", "ok", "next"]
    assert await store.delete_session_messages("s1") == 3
    assert await store.load_messages("s1") == []


async def test_concurrent_appends_keep_every_message(database_url):
    async with Database(database_url) as a, Database(database_url) as b:
        sa_, sb = SqlStore(a), SqlStore(b)
        await asyncio.gather(
            *(s.append_messages("s", [Message.user(f"m{i}")]) for i, s in enumerate([sa_, sb] * 10))
        )
        texts = sorted(m.text for m in await sa_.load_messages("s"))
    assert texts == sorted(f"m{i}" for i in range(20))


async def test_cached_history_follows_writes_from_anywhere(database_url):
    """Histories are cached per store; a write by another process (here: another store on its own
    connections) is seen at the next load, and callers cannot change the cache."""
    async with Database(database_url) as a, Database(database_url) as b:
        mine, other = SqlStore(a), SqlStore(b)
        await mine.append_messages("s", [Message.user("one")])
        first = await mine.load_messages("s")
        first.append(Message.user("local only"))  # the caller's list, not the cache
        await mine.append_messages("s", [Message.assistant("two")])
        assert [m.text for m in await mine.load_messages("s")] == ["one", "two"]

        await other.append_messages("s", [Message.user("three")])  # behind mine's back
        assert [m.text for m in await mine.load_messages("s")] == ["one", "two", "three"]
        await other.replace_messages("s", [Message.user("x"), Message.assistant("y"), Message.user("z")])
        assert [m.text for m in await mine.load_messages("s")] == ["x", "y", "z"]
        await other.delete_session_messages("s")
        assert await mine.load_messages("s") == []
        await mine.append_messages("s", [Message.user("again")])
        assert [m.text for m in await other.load_messages("s")] == ["again"]
        assert [m.text for m in await mine.load_messages("s")] == ["again"]


# ---- sessions ----------------------------------------------------------------------------------
async def test_sessions_list_latest_update(store):
    await store.get_or_create_session("a", chat_key="telegram:1", user_id="u1")
    await store.get_or_create_session("a", chat_key="ignored", user_id="ignored")  # no-op when present
    await store.append_messages("a", [Message.user("x"), Message.assistant("y")])
    await store.get_or_create_session("b", chat_key="telegram:1")
    info = await store.get_session("a")
    assert info is not None and (info.chat_key, info.user_id, info.message_count) == ("telegram:1", "u1", 2)
    assert info.created_at.tzinfo is not None
    assert [s.id for s in await store.list_sessions("telegram:1")] == ["b", "a"]
    assert (await store.latest_session("telegram:1")).id == "b"
    assert await store.update_session("b", archived=True, title="old")
    assert (await store.latest_session("telegram:1")).id == "a"
    assert [s.id for s in await store.list_sessions("telegram:1", include_archived=True)] == ["b", "a"]
    assert not await store.update_session("missing", title="x")
    assert await store.get_session("missing") is None


# ---- turns -------------------------------------------------------------------------------------
def same_turn(a: TurnRecord | None, b: TurnRecord) -> bool:
    return a is not None and a.model_copy(update={"updated_at": b.updated_at}) == b


async def test_turn_save_load_update(store):
    expires = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    turn = TurnRecord(
        id="t1",
        session_id="s1",
        model="main",
        rounds=2,
        calls={"c1": "done", "c2": "awaiting_approval"},
        plan=[PlanStep(text="fetch", status="done"), PlanStep(text="decide")],
        waiting=WaitingState(
            kind="approval",
            question="Buy 100 shares?",
            options=["yes", "no"],
            confirmation_target={"call_id": "c2", "approval_id": "a1"},
            expires_at=expires,
        ),
        status="suspended",
    )
    await store.save_turn(turn)
    loaded = await store.load_turn("t1")
    # the store stamps each write's time into the payload (start-up recovery reads a turn's age)
    assert loaded is not None and loaded.updated_at >= turn.updated_at
    assert same_turn(loaded, turn)
    assert same_turn(await store.open_turn("s1"), turn)
    assert [t.id for t in await store.open_turns()] == ["t1"]

    done = turn.model_copy(
        update={"status": "completed", "waiting": None, "calls": {"c1": "done", "c2": "done"}}
    )
    await store.save_turn(done)
    assert same_turn(await store.load_turn("t1"), done)
    assert await store.open_turn("s1") is None
    assert await store.open_turns() == []
    assert await store.load_turn("nope") is None


# ---- approvals ---------------------------------------------------------------------------------
def approval(id_: str = "a1", **kw) -> ApprovalRecord:
    args = {"code": "600519", "side": "buy", "qty": 100}
    return ApprovalRecord(
        id=id_,
        session_id="s1",
        turn_id="t1",
        call_id="c2",
        tool="execute_trade",
        arguments=args,
        args_hash=args_hash("execute_trade", args),
        requester="42",
        approvers=["42", "7"],
        chat_key="telegram:-100",
        **kw,
    )


async def test_approval_round_trip_and_second_resolve_loses(store):
    rec = approval(expires_at=datetime.now(UTC) + timedelta(minutes=10))
    await store.create_approval(rec)
    assert await store.get_approval("a1") == rec
    assert [a.id for a in await store.pending_approvals(session_id="s1")] == ["a1"]

    assert await store.resolve_approval("a1", status="approved", decided_by="42", decision="once") is True
    assert await store.resolve_approval("a1", status="denied", decided_by="7", decision="deny") is False
    got = await store.get_approval("a1")
    assert (got.status, got.decided_by, got.decision) == ("approved", "42", "once")
    assert await store.pending_approvals() == []
    assert (
        await store.resolve_approval("missing", status="approved", decided_by="42", decision="once") is False
    )


async def test_concurrent_resolves_have_exactly_one_winner(database_url):
    async with Database(database_url) as a, Database(database_url) as b:
        stores = [SqlStore(a), SqlStore(b)]
        for i in range(3):
            await stores[0].create_approval(approval(f"a{i}"))
            results = await asyncio.gather(
                *(
                    stores[n % 2].resolve_approval(
                        f"a{i}", status="denied" if n % 3 else "approved", decided_by=str(n), decision="x"
                    )
                    for n in range(12)
                )
            )
            assert results.count(True) == 1
            winner = results.index(True)
            assert (await stores[1].get_approval(f"a{i}")).decided_by == str(winner)


async def test_expired_approval_cannot_be_approved(store):
    past = datetime.now(UTC) - timedelta(seconds=1)
    await store.create_approval(approval(expires_at=past))
    assert await store.resolve_approval("a1", status="approved", decided_by="42", decision="once") is False
    assert (await store.get_approval("a1")).status == "pending"
    assert await store.resolve_approval("a1", status="expired", decided_by="", decision="expired") is True
    assert await store.resolve_approval("a1", status="approved", decided_by="42", decision="once") is False


async def test_usage_totals_per_model(store):
    now = datetime.now(UTC)

    def rec(session, turn, model, usage, cost, age_days=0.0):
        return UsageRecord(
            session_id=session,
            turn_id=turn,
            model=model,
            usage=usage,
            cost=cost,
            created_at=now - timedelta(days=age_days),
        )

    for r in [
        rec("s1", "t1", "main", Usage(100, 20, 50, 10), 0.01),
        rec("s1", "t1", "main", Usage(200, 30, 0, 0), 0.02),  # second call, same turn
        rec("s2", "t2", "main", Usage(10, 5), 0.001),
        rec("s2", "t2", "backup", Usage(1000, 100), 0.5),
        rec("s3", "t3", "main", Usage(9999, 9999), 9.0, age_days=40),  # outside 30 days
    ]:
        await store.record_usage(r)

    totals = await store.usage_totals(30)
    assert [t.model for t in totals] == ["backup", "main"]  # by cost
    main = totals[1]
    assert (main.turns, main.calls, main.input_tokens, main.output_tokens) == (2, 3, 310, 55)
    assert (main.cache_read_tokens, main.cache_write_tokens) == (50, 10)
    assert main.cost == pytest.approx(0.031)
    assert {t.model: t.turns for t in await store.usage_totals(None)} == {"main": 3, "backup": 1}
    only_s2 = await store.usage_totals(30, session_id="s2")
    assert {t.model: t.input_tokens for t in only_s2} == {"backup": 1000, "main": 10}
    assert await store.usage_totals(30, now=now + timedelta(days=400)) == []


# ---- inbound de-duplication --------------------------------------------------------------------
async def test_processed_updates_dedupe_survives_restart(database_url):
    async with Database(database_url) as db:
        store = SqlStore(db)
        assert await store.mark_update_processed("telegram", 1001) is True
        assert await store.mark_update_processed("telegram", 1001) is False
        assert await store.mark_update_processed("discord", 1001) is True  # per platform
        results = await asyncio.gather(*(store.mark_update_processed("telegram", 2002) for _ in range(8)))
        assert results.count(True) == 1
    async with Database(database_url) as db:  # "after a restart"
        store = SqlStore(db)
        assert await store.mark_update_processed("telegram", "1001") is False
        assert await store.prune_processed_updates(timedelta(hours=1)) == 0
        assert (
            await store.prune_processed_updates(timedelta(hours=1), now=datetime.now(UTC) + timedelta(days=1))
            == 3
        )
        assert await store.mark_update_processed("telegram", 1001) is True


async def test_received_messages_wait_until_they_are_in_the_history(database_url):
    """A message recorded with its update id stays pending until the transaction that writes it
    into the history (or a release) clears it; pending ones survive a restart and pruning."""
    async with Database(database_url) as db:
        store = SqlStore(db)
        assert await store.receive_message("telegram", 7, {"text": "also 000001"}) is True
        assert await store.receive_message("telegram", 7, {"text": "again"}) is False  # duplicate
        assert await store.mark_update_processed("telegram", 7) is False  # one id space
        assert await store.receive_message("telegram", 8, {"text": "yes"}) is True
        assert await store.receive_message("discord", 9, {"text": "third"}) is True
    async with Database(database_url) as db:  # "after a crash"
        store = SqlStore(db)
        pending = await store.received_pending()
        assert [(r, p["text"]) for r, _, p in pending] == [
            (("telegram", "7"), "also 000001"),
            (("telegram", "8"), "yes"),
            (("discord", "9"), "third"),
        ]
        assert all(at.tzinfo is not None for _, at, _ in pending)
        later = datetime.now(UTC) + timedelta(days=30)
        assert await store.prune_processed_updates(timedelta(days=7), now=later) == 0  # all pending
        await store.commit("s1", messages=[Message.user("also 000001")], received=[("telegram", "7")])
        await store.release_received([("telegram", "8")])
        assert [r for r, _, _ in await store.received_pending()] == [("discord", "9")]
        assert [m.text for m in await store.load_messages("s1")] == ["also 000001"]
        assert await store.prune_processed_updates(timedelta(days=7), now=later) == 2
        assert await store.mark_update_processed("telegram", 7) is True  # forgotten after pruning


# ---- kv ----------------------------------------------------------------------------------------
async def test_kv(store):
    assert await store.kv_get("offset", 0) == 0
    await store.kv_set("offset", {"telegram": 5, "list": [1, "二"]})
    await store.kv_set("offset", {"telegram": 6})
    assert await store.kv_get("offset") == {"telegram": 6}
    assert await store.kv_delete("offset") and not await store.kv_delete("offset")
    assert await store.kv_get("offset") is None


async def test_usage_summary_counts_each_turn_once(store):
    await store.record_usage(
        UsageRecord(session_id="s", turn_id="t1", model="main", usage=Usage(10, 1), cost=0.5)
    )
    await store.record_usage(
        UsageRecord(session_id="s", turn_id="t1", model="backup", usage=Usage(20, 2), cost=0.25)
    )
    summary = await store.usage_summary(1)
    assert (summary.model, summary.turns, summary.calls, summary.input_tokens, summary.cost) == (
        "*",
        1,
        2,
        30,
        0.75,
    )
    empty = await store.usage_summary(1, session_id="none")
    assert (empty.turns, empty.calls, empty.cost) == (0, 0, 0.0)


def test_history_cache_is_bounded_by_messages():
    from memory.stores import _HistoryCache

    cache = _HistoryCache(max_messages=5)
    msgs = [Message.user(str(i)) for i in range(3)]
    cache.put("a", "v1", list(msgs))
    cache.put("b", "v1", list(msgs[:2]))
    assert cache.get("a") is not None  # now the most recently used
    cache.advance("b", "v1", "v2", [Message.user("x")])  # 3 + 3 > 5: the least recent (b) goes
    assert cache.get("b") is None and cache.get("a") is not None
    cache.put("big", "v1", [Message.user(str(i)) for i in range(6)])  # larger than the bound
    assert cache.get("big") is None
    cache.advance("a", "stale", "v3", [Message.user("y")])  # not the version it holds: forgotten
    assert cache.get("a") is None

    sessions = _HistoryCache(max_messages=5, max_sessions=2)
    for name in ("x", "y", "z"):  # empty histories (sessions read before they exist) count here
        sessions.put(name, "v", [])
    assert sessions.get("x") is None and sessions.get("y") is not None and sessions.get("z") is not None


async def test_side_calls_are_no_turns_and_are_totalled_by_kind(store):
    """Memory upkeep's model calls (turn id `side:<kind>:…`) count as calls, never as turns, and
    are totalled per kind — on SQLite and PostgreSQL."""
    for turn, usage, cost in [
        ("t1", Usage(100, 10), 0.01),
        ("side:taskstate:aa", Usage(40, 5), 0.001),
        ("side:taskstate:bb", Usage(60, 5), 0.002),
        ("side:memory:cc", Usage(30, 3), 0.0005),
    ]:
        await store.record_usage(
            UsageRecord(session_id="s", turn_id=turn, model="main", usage=usage, cost=cost)
        )
    summary = await store.usage_summary(1)
    assert (summary.turns, summary.calls, summary.input_tokens) == (1, 4, 230)
    [main] = await store.usage_totals(1)
    assert (main.turns, main.calls) == (1, 4)
    side = {s.model: s for s in await store.side_call_totals(1)}
    assert sorted(side) == ["memory", "taskstate"]
    assert (side["taskstate"].calls, side["taskstate"].input_tokens, side["taskstate"].output_tokens) == (
        2,
        100,
        10,
    )
    assert side["memory"].calls == 1 and side["memory"].cost == pytest.approx(0.0005)
