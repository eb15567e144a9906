"""Crash during execution at the broker: a paper order reserved (its `pending` row
written) by a process that died before the fill is filled once when the same key is asked again
— the approved call resumed after the restart — instead of being replayed as "pending". A
reservation of the running process is a fill in flight and is never filled a second time; a live
order's pending row is never sent again."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from markets_helpers import make_sessions
from sqlalchemy import update

from markets import broker as broker_module
from markets.broker import PaperBroker
from markets.data import MarketData
from markets.models import MarketTrade

MD = MarketData()


@pytest.fixture
async def sessions(tmp_path):
    engine, factory = await make_sessions(tmp_path)
    yield factory
    await engine.dispose()


async def _reserved(sessions, broker: PaperBroker, key: str, *, earlier: bool) -> int:
    trade_id, prev = await broker._reserve(key, "u1", "cn", "000001", "buy", 1000.0, "chat")
    assert prev is None
    if earlier:  # written by the process before the crash
        async with sessions() as s, s.begin():
            await s.execute(
                update(MarketTrade)
                .where(MarketTrade.id == trade_id)
                # before this process loaded the broker (however long the suite has run by now)
                .values(created_at=broker_module._PROCESS_STARTED - timedelta(minutes=1))
            )
    return trade_id


async def test_e2_a_reservation_left_by_a_crash_fills_once_when_asked_again(sessions):
    broker = PaperBroker(sessions, MD)
    await _reserved(sessions, broker, "tap", earlier=True)
    results = await asyncio.gather(*[broker.submit("u1", "000001", "buy", 1000, key="tap") for _ in range(4)])
    # one call claims the reservation and fills it; the others see it filled or in flight
    assert [r.status for r in results if not r.replayed] == ["filled"]
    assert all(r.status in ("filled", "pending") for r in results if r.replayed)
    (pos,) = await broker.portfolio.positions("u1")
    assert pos.quantity == 1000


async def test_a_reservation_of_this_process_is_a_fill_in_flight_never_a_second_fill(sessions):
    broker = PaperBroker(sessions, MD)
    await _reserved(sessions, broker, "inflight", earlier=False)
    r = await broker.submit("u1", "000001", "buy", 1000, key="inflight")
    assert r.replayed and r.status == "pending"
    assert await broker.portfolio.positions("u1") == []


async def test_a_live_pending_order_is_never_sent_again():
    from markets.broker import LiveCcxtBroker

    assert PaperBroker.refills_pending and not LiveCcxtBroker.refills_pending
