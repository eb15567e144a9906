"""Price alerts on live prices in trading hours: the quote parsers on the libraries' own shapes
(akshare minute bars, yfinance 1-minute frames, ccxt tickers: tests/fakes/market_libs.py), the
market hours (A-share sessions and calendar, crypto 24/7), and the evaluation on a real SQLite
store — only symbols with a live-price alert are asked, each trigger is recorded once, and the
refresh after the close does not fire the same day's trigger again. Time is injected."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from markets.alerts import Alert, AlertSpec, AlertStore, evaluate_alerts
from markets.alerts_live import evaluate_live, live_fire, live_session
from markets.data import MarketData
from markets.errors import NoMinuteData
from markets.providers.bundled import BundledProvider
from markets.providers.network import AkshareProvider, CcxtProvider
from markets.providers.stored import StoredProvider
from markets.quotes import (
    AkshareQuotes,
    CcxtQuotes,
    Quote,
    YFinanceQuotes,
    parse_ccxt_ticker,
    parse_yfinance_minutes,
    quote_providers,
)
from markets.refresh import refresh_market
from markets.store import BarStore
from memory.db import Database
from tests.fakes.market_libs import (
    FakeAkshare,
    FakeCcxtExchange,
    FakeCcxtModule,
    FakeYfinance,
    akshare_minute_rows,
    ccxt_ticker,
)

SH = ZoneInfo("Asia/Shanghai")
MON = date(2026, 12, 7)  # a trading day; the stored daily bars end Friday 2026-12-04
AT_1005 = datetime(2026, 12, 7, 10, 5, tzinfo=SH)


def sh(day: date, hh: int, mm: int) -> datetime:
    return datetime(day.year, day.month, day.day, hh, mm, tzinfo=SH)


# ---- the quote parsers ------------------------------------------------------------------------
def test_ccxt_ticker_shape():
    at = datetime(2026, 12, 6, 3, 0, 12, tzinfo=UTC)
    q = parse_ccxt_ticker(ccxt_ticker("BTC/USDT", 91_234.5, at), "BTC/USDT", at)
    assert (q.price, q.high, q.low, q.session, q.source) == (
        91_234.5,
        91_234.5,
        91_234.5,
        date(2026, 12, 6),
        "ccxt",
    )
    assert q.at == at.replace(microsecond=0)
    t = ccxt_ticker("BTC/USDT", None, at) | {"close": 90_000.0}  # no `last`: the close
    assert parse_ccxt_ticker(t, "BTC/USDT", at).price == 90_000.0
    with pytest.raises(NoMinuteData):
        parse_ccxt_ticker(ccxt_ticker("BTC/USDT", None, at), "BTC/USDT", at)
    late = datetime(2026, 12, 6, 23, 59, tzinfo=UTC)  # the UTC day cuts the crypto session
    assert parse_ccxt_ticker(ccxt_ticker("BTC/USDT", 1.0, late), "BTC/USDT", late).session == date(
        2026, 12, 6
    )


def test_yfinance_minutes_shape_today_only_and_nan_minutes_skipped():
    yf = FakeYfinance()
    yf.minutes["600519.SS"] = [
        (sh(date(2026, 12, 4), 14, 59), 1500.0),  # Friday's last minutes are in the frame too
        (sh(MON, 9, 31), 1490.0),
        (sh(MON, 9, 32), math.nan),  # no trade in that minute
        (sh(MON, 9, 33), 1480.0),
    ]
    q = YFinanceQuotes(module=yf).quote(_inst("600519"), sh(MON, 9, 34))
    assert yf.calls == ["600519.SS"]
    assert q.price == 1480.0 and q.session == MON and q.at == sh(MON, 9, 33)
    assert q.high == pytest.approx(1490 * 1.001) and q.low == pytest.approx(1480 * 0.999)
    with pytest.raises(NoMinuteData, match="no minute bars"):
        parse_yfinance_minutes(_records(yf, "600519.SS")[:1], "600519", "cn", sh(MON, 9, 34))


def test_akshare_quote_asks_for_today_and_reads_the_minute_bars():
    ak = FakeAkshare()
    ak.minutes["600519"] = akshare_minute_rows(MON, [1500.0, 1495.5, 1502.25, 1499.0])
    q = AkshareQuotes(module=ak).quote(_inst("600519"), AT_1005.astimezone(UTC))
    assert ak.calls == [("stock_zh_a_hist_min_em", {"symbol": "600519", "start_date": "2026-12-07 09:00:00"})]
    assert q.price == 1499.0 and q.session == MON and q.at == sh(MON, 9, 33)
    assert q.high == 1502.26 and q.low == 1495.49  # the session's extremes so far
    with pytest.raises(NoMinuteData):  # nothing traded yet today
        AkshareQuotes(module=ak).quote(_inst("600519"), sh(date(2026, 12, 8), 9, 20))


def test_quote_providers_follow_the_configured_provider():
    assert [p.name for p in quote_providers(["akshare", "bundled"])] == ["akshare"]
    assert [p.name for p in quote_providers(["ccxt", "bundled"])] == ["ccxt"]
    assert quote_providers(["bundled"]) == [] and quote_providers(["csv", "bundled"]) == []


# ---- market hours -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("when", "session"),
    [
        (sh(MON, 9, 29), None),  # before the open
        (sh(MON, 9, 30), MON),
        (sh(MON, 11, 30), MON),
        (sh(MON, 12, 0), None),  # the lunch break
        (sh(MON, 13, 0), MON),
        (sh(MON, 15, 0), MON),
        (sh(MON, 15, 1), None),  # closed: the refresh after the close takes over
        (sh(date(2026, 12, 5), 10, 0), None),  # Saturday
        (sh(date(2026, 10, 1), 10, 0), None),  # National Day (a Thursday) in the calendar
    ],
)
def test_cn_trading_hours_follow_the_sessions_and_the_calendar(when, session):
    assert live_session(MarketData(), "cn", when.astimezone(UTC)) == session


def test_crypto_trades_around_the_clock_by_utc_day():
    md = MarketData()
    assert live_session(md, "crypto", datetime(2026, 12, 5, 23, 30, tzinfo=SH)) == date(2026, 12, 5)
    assert live_session(md, "crypto", datetime(2026, 12, 6, 0, 0, tzinfo=UTC)) == date(2026, 12, 6)


# ---- the decision ----------------------------------------------------------------------------
def _alert(kind: str, value: float, baseline: date | None = date(2026, 12, 4)) -> Alert:
    return Alert(1, "u", "telegram:1", "600519", "cn", kind, value, "", baseline, "active")


prices = st.floats(1, 10_000, allow_nan=False)


@given(price=prices, up=st.floats(0, 0.2), down=st.floats(0, 0.2), level=prices, prev=prices,
       pct=st.floats(0.1, 20), day=st.integers(-3, 3))  # fmt: skip
def test_live_fire_decides_by_the_session_extremes_and_the_previous_close(
    price, up, down, level, prev, pct, day
):
    session = date(2026, 12, 4) + timedelta(days=day)
    q = Quote("600519", price, price * (1 + up), price * (1 - down), AT_1005, session, "akshare")
    after = day > 0
    above, below, move = (live_fire(_alert(k, v), q, prev) for k, v in
                          (("price_above", level), ("price_below", level), ("move_pct", pct)))  # fmt: skip
    assert (above is not None) == (after and q.high > level) and (above is None or above == q.high)
    assert (below is not None) == (after and q.low < level) and (below is None or below == q.low)
    m = (price / prev - 1) * 100
    assert (move is not None) == (after and abs(m) >= pct)
    if move is not None:
        assert math.copysign(1, move) == math.copysign(1, m)
    # the close's conditions, RSI, moving averages and Wyckoff events are never read live
    for kind in ("close_above", "close_below", "rsi_above", "cross_above_ma"):
        assert live_fire(_alert(kind, 1), q, prev) is None
    assert live_fire(_alert("move_pct", pct), q, None) is None  # no previous close: no move


# ---- evaluation on a real store ---------------------------------------------------------------
class World:
    def __init__(self, tmp_path, db):
        self.ak = FakeAkshare(end=date(2026, 12, 4))
        self.ex = FakeCcxtExchange(end=date(2026, 12, 5))
        store = BarStore(tmp_path / "bars")
        clock = lambda: datetime(2026, 12, 6, 9, 0, tzinfo=UTC)  # noqa: E731
        self.md = MarketData(
            [
                StoredProvider(AkshareProvider(module=self.ak), store, clock=clock),
                StoredProvider(CcxtProvider(module=FakeCcxtModule(self.ex)), store, clock=clock),
                BundledProvider(),
            ],
            quote_providers=[AkshareQuotes(module=self.ak), CcxtQuotes(module=FakeCcxtModule(self.ex))],
        )
        self.store = AlertStore(db.sessionmaker)

    def close(self, code: str) -> float:
        return float(self.md.bars(code).close[-1])

    def minute_calls(self) -> list[str]:
        out = [kw["symbol"] for name, kw in self.ak.calls if name == "stock_zh_a_hist_min_em"]
        self.ak.calls.clear()
        return out


@pytest.fixture
async def world(tmp_path):
    async with Database(f"sqlite+aiosqlite:///{tmp_path / 'tapebot.db'}") as db:
        yield World(tmp_path, db)


async def test_each_live_trigger_is_recorded_once_and_not_again_at_the_close(world):
    w, store = world, world.store
    c0, c1 = w.close("600519"), w.close("300750")
    level = round(c0 * 0.98, 2)
    below = await store.create(
        "u1", "telegram:1", AlertSpec("price_below", level, "600519"), "cn", date(2026, 12, 4)
    )
    closing = await store.create(
        "u1", "telegram:1", AlertSpec("close_below", level, "600519"), "cn", date(2026, 12, 4)
    )
    await store.watch("u1", "300750", "cn")
    move = await store.create("u1", "telegram:1", AlertSpec("move_pct", 3), "cn", date(2026, 12, 4))
    await store.create("u1", "telegram:1", AlertSpec("rsi_above", 70, "000001"), "cn", date(2026, 12, 4))
    w.ak.calls.clear()

    # 10:05: 600519 dipped under the level at 09:32 and is back above it; 300750 is up 3.5%
    w.ak.minutes["600519"] = akshare_minute_rows(MON, [c0, round(c0 * 0.97, 2), c0 * 0.99, c0])
    w.ak.minutes["300750"] = akshare_minute_rows(MON, [c1, round(c1 * 1.035, 2)])
    fired = await evaluate_live(store, w.md, "cn", AT_1005.astimezone(UTC))
    assert sorted((f.alert.id, f.symbol, f.bar_date) for f in fired) == [
        (below.id, "600519", MON), (move.id, "300750", MON)
    ]  # fmt: skip
    by = {f.alert.id: f for f in fired}
    assert by[below.id].observed == pytest.approx(round(c0 * 0.97, 2) - 0.01)  # the session low
    assert by[move.id].observed == pytest.approx(3.5, abs=0.01)
    assert sorted(w.minute_calls()) == ["300750", "600519"]  # not 000001: its alert is not a price

    # the next polls: nothing new (the price alert is done, the move is today's already)
    w.ak.minutes["300750"] = akshare_minute_rows(MON, [c1, round(c1 * 1.035, 2), round(c1 * 1.05, 2)])
    assert await evaluate_live(store, w.md, "cn", (AT_1005 + timedelta(minutes=1)).astimezone(UTC)) == []
    assert w.minute_calls() == ["300750"]  # 600519's only live alert is done: no longer asked
    assert [a.id for a in await store.alerts("u1")] == [closing.id, move.id, move.id + 1]

    # after the close: Monday's bar closes 300750 +5% and 600519 under the level
    w.ak.end = MON
    w.ak.override["600519"] = lambda closes: [*closes[:-1], round(c0 * 0.96, 2)]
    w.ak.override["300750"] = lambda closes: [*closes[:-1], round(c1 * 1.05, 2)]
    refresh_market(w.md, "cn", ["600519", "300750"])
    at_close = await evaluate_alerts(store, w.md, ["cn"])
    fired_at_close = [(f.alert.id, f.bar_date) for f in at_close if f.alert.kind != "rsi_above"]
    assert fired_at_close == [(closing.id, MON)]  # the close's own alert only


async def test_outside_hours_without_alerts_or_a_live_provider_nothing_is_asked(world):
    w, store = world, world.store
    assert await evaluate_live(store, w.md, "cn", AT_1005) == []  # no alert at all
    await store.create("u1", "telegram:1", AlertSpec("price_above", 1, "600519"), "cn", date(2026, 12, 4))
    w.ak.minutes["600519"] = akshare_minute_rows(MON, [100.0])
    assert await evaluate_live(store, w.md, "cn", sh(MON, 12, 10)) == []  # lunch
    assert w.minute_calls() == []
    bundled_only = MarketData([w.md.providers[0], BundledProvider()])  # daily bars, no live quotes
    assert await evaluate_live(store, bundled_only, "cn", AT_1005) == []
    assert w.minute_calls() == []
    assert len(await evaluate_live(store, w.md, "cn", AT_1005)) == 1


async def test_a_stale_quote_and_a_failing_symbol_do_not_fire_or_stop_the_poll(world):
    w, store = world, world.store
    for code in ("600519", "000001"):
        await store.create("u1", "telegram:1", AlertSpec("price_above", 1, code), "cn", date(2026, 12, 4))
    w.ak.minutes["600519"] = akshare_minute_rows(date(2026, 12, 4), [100.0])  # suspended: Friday's only
    w.ak.minutes["000001"] = akshare_minute_rows(MON, [12.0])
    assert [f.symbol for f in await evaluate_live(store, w.md, "cn", AT_1005)] == ["000001"]

    class Broken(AkshareQuotes):
        def quote(self, inst, now):
            if inst.symbol == "600519":
                raise ConnectionError("Eastmoney reset the connection")
            return super().quote(inst, now)

    await store.create("u2", "telegram:2", AlertSpec("price_above", 1, "600519"), "cn", date(2026, 12, 4))
    await store.create("u2", "telegram:2", AlertSpec("price_below", 1e6, "000001"), "cn", date(2026, 12, 4))
    w.md.quote_providers = [Broken(module=w.ak)]
    got = await evaluate_live(store, w.md, "cn", AT_1005)
    assert [(f.alert.user_id, f.symbol) for f in got] == [("u2", "000001")]


async def test_crypto_polls_the_ccxt_ticker_at_any_hour(world):
    w, store = world, world.store
    prev = w.close("BTC/USDT")  # the 2026-12-05 daily close
    a = await store.create(
        "u1", "telegram:1", AlertSpec("move_pct", 5, "BTC/USDT"), "crypto", date(2026, 12, 5)
    )
    sunday_night = datetime(2026, 12, 6, 22, 40, tzinfo=UTC)
    w.ex.tickers["BTC/USDT"] = ccxt_ticker("BTC/USDT", round(prev * 1.02, 2), sunday_night)
    assert await evaluate_live(store, w.md, "crypto", sunday_night) == []  # +2%: not yet
    w.ex.tickers["BTC/USDT"] = ccxt_ticker("BTC/USDT", round(prev * 0.94, 2), sunday_night)
    fired = await evaluate_live(store, w.md, "crypto", sunday_night)
    assert [(f.alert.id, f.bar_date) for f in fired] == [(a.id, date(2026, 12, 6))]
    assert fired[0].observed == pytest.approx(-6.0, abs=0.01)
    assert await evaluate_live(store, w.md, "crypto", sunday_night + timedelta(minutes=1)) == []


async def test_a_one_shot_watchlist_alert_fires_once_across_its_symbols(world):
    w, store = world, world.store
    for code in ("600519", "300750"):
        await store.watch("u1", code, "cn")
        w.ak.minutes[code] = akshare_minute_rows(MON, [50.0])
    await store.create("u1", "telegram:1", AlertSpec("price_above", 10), "cn", date(2026, 12, 4))
    assert len(await evaluate_live(store, w.md, "cn", AT_1005)) == 1


def _inst(code: str):
    return MarketData().resolve(code)


def _records(yf: FakeYfinance, ticker: str):
    return yf.download(ticker, interval="1m").to_dict("records")
