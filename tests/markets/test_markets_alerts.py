"""Alerts: stored on SQLite and PostgreSQL (through the migrations), checked against the live
store's newest bars, each firing recorded once however often or by whom the bars are evaluated."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from markets.alerts import Alert, AlertSpec, AlertStore, describe, evaluate_alerts, fires, num
from markets.bars import Bars
from markets.data import MarketData
from markets.errors import MarketError
from markets.providers.bundled import BundledProvider
from markets.providers.network import AkshareProvider
from markets.providers.stored import StoredProvider
from markets.refresh import refresh_market
from markets.store import BarStore
from memory.db import Database
from tests.fakes.market_libs import FakeAkshare

NOW = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)


@pytest.fixture
async def sessions(database_url):
    async with Database(database_url) as db:  # the migrations create the alert tables
        yield db.sessionmaker


def live(tmp_path, ak: FakeAkshare) -> MarketData:
    p = StoredProvider(AkshareProvider(module=ak), BarStore(tmp_path / "bars"), clock=lambda: NOW)
    return MarketData([p, BundledProvider()])


async def test_a_threshold_fires_once_on_the_first_newer_bar(sessions, tmp_path):
    ak = FakeAkshare(end=date(2026, 12, 3))
    md = live(tmp_path, ak)
    c0 = float(md.bars("600519").close[-1])
    store = AlertStore(sessions)
    a = await store.create(
        "u1", "telegram:1", AlertSpec("close_below", round(c0 * 0.5, 2), "600519"), "cn", md.as_of("cn")
    )
    assert a.condition() == f"600519: close below {round(c0 * 0.5, 2):g}"
    assert await evaluate_alerts(store, md, ["cn"]) == []  # the bar it was set on does not count
    ak.end = date(2026, 12, 4)
    ak.override["600519"] = lambda closes: [*closes[:-1], round(c0 * 0.4, 2)]
    refresh_market(md, "cn")
    fired = await evaluate_alerts(store, md, ["cn"])
    assert [(f.symbol, f.bar_date, f.observed) for f in fired] == [
        ("600519", date(2026, 12, 4), round(c0 * 0.4, 2))
    ]
    assert await evaluate_alerts(store, md, ["cn"]) == []  # evaluated again: recorded once
    assert [x.status for x in await store.alerts("u1", include_done=True)] == ["done"]
    assert [f.id for f in await store.pending()] == [fired[0].id]


async def test_watchlist_move_alert_and_a_second_evaluator(sessions, tmp_path):
    ak = FakeAkshare(end=date(2026, 12, 3))
    md = live(tmp_path, ak)
    md.bars("600519")
    md.bars("300750")
    store = AlertStore(sessions)
    assert await store.watch("u1", "600519", "cn") and await store.watch("u1", "300750", "cn")
    assert not await store.watch("u1", "600519", "cn")  # once on the list
    await store.create("u1", "telegram:1", AlertSpec("move_pct", 5, ""), "cn", md.as_of("cn"))
    ak.end = date(2026, 12, 4)
    ak.override["300750"] = lambda closes: [*closes[:-1], round(closes[-2] * 1.08, 2)]
    refresh_market(md, "cn")
    other = AlertStore(sessions)  # another replica, or `tapebot data update`, with the same bars
    a, b = await evaluate_alerts(store, md, ["cn"]), await evaluate_alerts(other, md, ["cn"])
    assert [(f.symbol, f.observed) for f in a] == [("300750", pytest.approx(8.0, abs=0.05))] and b == []


async def test_a_one_shot_watchlist_alert_fires_once_when_replicas_record_different_symbols(sessions):
    """Two processes see the level crossed by different watched symbols at once (the live poll of
    two replicas): whoever records first ends the alert, the other records nothing."""
    import asyncio

    one, two = AlertStore(sessions), AlertStore(sessions)
    a = await one.create("u1", "telegram:1", AlertSpec("price_above", 10), "cn", date(2026, 12, 4))
    got = await asyncio.gather(
        one.record(a, "600519", date(2026, 12, 7), 11.0), two.record(a, "300750", date(2026, 12, 7), 12.0)
    )
    assert sum(f is not None for f in got) == 1
    assert [f.symbol for f in await one.pending()] == [next(f.symbol for f in got if f is not None)]
    assert await one.alerts("u1") == []  # done
    assert await two.record(a, "000001", date(2026, 12, 8), 13.0) is None  # and stays done


async def test_claim_is_compare_and_set_and_removal_is_per_user(sessions, tmp_path):
    md = live(tmp_path, FakeAkshare(end=date(2026, 12, 3)))
    md.bars("600519")
    store = AlertStore(sessions)
    a = await store.create("u1", "telegram:1", AlertSpec("close_above", 1, "600519"), "cn", date(2026, 12, 2))
    fired = await evaluate_alerts(store, md, ["cn"])
    assert len(fired) == 1
    assert await store.claim(fired[0].id) and not await store.claim(fired[0].id)
    with pytest.raises(MarketError, match="no alert #"):
        await store.remove("someone-else", a.id)
    b = await store.create("u1", "telegram:1", AlertSpec("wyckoff", 0, "600519", "spring"), "cn", None)
    assert b.event == "Spring" and (await store.remove("u1", b.id)).status == "removed"


@pytest.mark.parametrize(
    "spec, why",
    [
        (AlertSpec("close_below", 0, "600519"), "positive"),
        (AlertSpec("rsi_above", 120, "600519"), "between 0 and 100"),
        (AlertSpec("wyckoff", 0, "600519", "moon"), "unknown Wyckoff event"),
        (AlertSpec("price_is_nice", 1, "600519"), "unknown alert kind"),
    ],
)
def test_bad_conditions_are_refused_with_the_reason(spec, why):
    with pytest.raises(MarketError, match=why):
        spec.check()


def test_conditions_read_in_both_languages():
    assert describe("close_below", 1400, "", "en") == "close below 1400"
    assert describe("close_below", 1400, "", "zh") == "收盘价低于 1400"
    assert describe("wyckoff", 0, "Spring", "zh") == "出现新的威科夫 Spring 事件"


def bars_of(closes: list[float], end: date) -> Bars:
    days = np.array([np.datetime64(end - timedelta(days=len(closes) - 1 - i)) for i in range(len(closes))])
    c = np.array(closes)
    return Bars("600519", days.astype("datetime64[D]"), c, c, c, c, np.ones(len(c)))


@settings(max_examples=200, deadline=None)
@given(
    closes=st.lists(st.floats(1, 1000, allow_nan=False), min_size=2, max_size=30),
    level=st.floats(1, 1000, allow_nan=False),
    below=st.booleans(),
    baseline_back=st.integers(0, 3),
)
def test_threshold_fires_exactly_when_the_new_close_is_beyond_the_level(closes, level, below, baseline_back):
    end = date(2026, 12, 4)
    kind = "close_below" if below else "close_above"
    alert = Alert(1, "u", "c", "600519", "cn", kind, level, "", end - timedelta(days=baseline_back), "active")
    got = fires(alert, bars_of(closes, end))
    beyond = closes[-1] < level if below else closes[-1] > level
    assert got == ([(end, closes[-1])] if beyond and baseline_back > 0 else [])


def test_a_wyckoff_alert_fires_on_a_new_spring_and_not_on_a_failed_one():
    from markets_helpers import Builder, accumulation

    bars, idx = accumulation(upto="spring", with_test=False)
    upto = bars._take(slice(0, idx["Spring"] + 2))
    spring_day = upto.dates[idx["Spring"]].astype(object)
    before = upto.dates[idx["Spring"] - 1].astype(object)
    alert = Alert(1, "u", "c", "TEST", "cn", "wyckoff", 0.0, "Spring", before, "active")
    [(day, price)] = fires(alert, upto)
    assert day == spring_day and price == pytest.approx(91.0)
    assert fires(Alert(1, "u", "c", "TEST", "cn", "wyckoff", 0.0, "Spring", spring_day, "active"), upto) == []
    assert fires(Alert(1, "u", "c", "TEST", "cn", "wyckoff", 0.0, "UTAD", before, "active"), upto) == []

    b = Builder()  # the same spring, then a close under its low: failed, no alert
    rows = np.column_stack([bars.open, bars.high, bars.low, bars.close, bars.volume])[: idx["Spring"] + 1]
    b.rows = [tuple(r) for r in rows]
    b.c = rows[-1, 3]
    b.bar(96.0, 96.2, 89.0, 89.5, 1.0e6)
    b.bar(89.5, 90.0, 88.5, 89.0, 0.8e6)
    failed = b.build()
    assert fires(alert, failed) == []


def test_the_condition_states_every_digit_of_the_level():
    # BTC-size levels: `:g` showed 151234.5 as 151234 and 1000000 as 1e+06
    assert describe("price_above", 151234.5, "") == "price trades above 151234.5"
    assert describe("close_below", 1_000_000, "", "zh") == "收盘价低于 1000000"
    assert describe("close_below", 0.00012345, "") == "close below 0.00012345"


@given(st.floats(1e-6, 1e9, allow_nan=False))
def test_num_reads_back_as_the_value(x):
    assert float(num(x)) == pytest.approx(x, rel=1e-12, abs=5e-9)
    assert "e" not in num(x)
