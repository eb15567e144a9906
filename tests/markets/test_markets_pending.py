"""Paper orders blocked by a price limit stay pending and are retried at the next bar's open ("a blocked order stays pending and is retried on the next bar", the paper broker beside the
backtester's `retry_blocked`), and traders' keys follow the wall-clock session.

The data provider is a CSV folder in a tmp dir; "the next bar arrives" is a line appended to its file,
and a fresh MarketData/MarketServices over the same SQLite file stands for the next run of the bot
(so exactly-once is checked across restarts too). The wall clock is injected."""

from __future__ import annotations

import asyncio
import itertools
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markets_helpers import make_sessions

from agent.tools.registry import Deps, ToolContext
from markets.backtest import BacktestConfig, run
from markets.bars import Bars
from markets.broker import PaperBroker, first_open_off_the_limit
from markets.data import MarketData
from markets.errors import MarketError
from markets.panel import Panel
from markets.providers import CsvFolderProvider
from markets.rules import MarketRules, limit_prices
from markets.services import MarketServices, MarketSettings
from markets.strategies import StrategyStore, run_trader_once
from markets.tools import market_tools

HEADER = "date,open,high,low,close,volume\n"
# 600000 (main board, ±10 %): 2025-09-02 closes at its limit-up 11.00 (prev 10.00), not locked.
BASE = [
    ("2025-09-01", 10.0, 10.2, 9.9, 10.0),
    ("2025-09-02", 10.6, 11.0, 10.5, 11.0),
]
LOCKED_UP = ("2025-09-03", 12.1, 12.1, 12.1, 12.1)  # one-price bar at the limit-up (11.00 × 1.1)
OFF_LIMIT = ("2025-09-04", 12.5, 13.0, 12.3, 12.8)  # opens below its limit-up 13.31: fillable
NEXT_OPEN = ("2025-09-03", 11.5, 11.8, 11.2, 11.6)  # right after BASE: opens below 12.10, fillable
PLAIN = [("2025-09-01", 20.0, 20.5, 19.8, 20.0), ("2025-09-02", 20.1, 20.4, 19.9, 20.2)]


def at(day: str, hour: int = 2):  # 02:00 UTC = 10:00 in Shanghai
    return lambda: datetime.fromisoformat(f"{day}T{hour:02d}:00:00+00:00")


def write(folder: Path, code: str, rows) -> None:
    (folder / f"{code}.csv").write_text(
        HEADER + "".join(f"{d},{o},{h},{lo},{c},1000000\n" for d, o, h, lo, c in rows)
    )


def append(folder: Path, code: str, row) -> None:
    d, o, h, lo, c = row
    with (folder / f"{code}.csv").open("a") as f:
        f.write(f"{d},{o},{h},{lo},{c},1000000\n")


@pytest.fixture
async def db(tmp_path):
    engine, factory = await make_sessions(tmp_path)
    yield factory
    await engine.dispose()


@pytest.fixture
def folder(tmp_path):
    f = tmp_path / "bars"
    f.mkdir()
    write(f, "600000", BASE)
    write(f, "600036", PLAIN)
    return f


CALLS = itertools.count()


class Bot:
    """One run of the bot: fresh market data read from the folder, the same database."""

    def __init__(self, db, folder: Path, day: str, hour: int = 2, **settings):
        self.svc = MarketServices(
            data=MarketData([CsvFolderProvider(folder)]),
            session_factory=db,
            results_dir=folder.parent,
            settings=MarketSettings(**settings),
            clock=at(day, hour),
        )

    async def call(self, tool: str, args: dict | None = None, user: str = "u1", call_id: str | None = None):
        ctx = ToolContext(
            call_id=call_id or f"{tool}-{next(CALLS)}", session_id="s", user_id=user, deps=Deps(self.svc)
        )
        return await market_tools.get(tool).call(ctx, args or {})

    def broker(self) -> PaperBroker:
        return PaperBroker(self.svc.session_factory, self.svc.data, self.svc.settings, clock=self.svc.clock)


async def filled(db, folder, day="2025-09-10") -> list[dict]:
    trades = await Bot(db, folder, day).broker().portfolio.trades("u1")
    return [t for t in trades if t["status"] == "filled"]


async def test_a_blocked_buy_waits_is_listed_and_fills_once_at_the_next_open(db, folder):
    bot = Bot(db, folder, "2025-09-02")
    r = await bot.call("execute_trade", {"code": "600000", "side": "buy", "quantity": 1000}, call_id="c1")
    assert r["status"] == "waiting" and r["price"] is None
    assert r["note"].startswith("pending: blocked at limit-up") and "next bar's open" in r["note"]
    assert "2025-09-02" in r["reason"]
    view = await bot.call("portfolio")
    [pend] = view["paper"]["pending_orders"]
    assert (pend["id"], pend["symbol"], pend["side"], pend["quantity"]) == (r["id"], "600000", "buy", 1000)
    assert view["paper"]["positions"] == []
    assert [p["id"] for p in (await bot.call("get_positions"))["pending"]] == [r["id"]]
    cash0 = (await bot.call("get_balance"))["balances"][0]["cash"]
    assert cash0 == 1_000_000  # nothing is taken while it waits

    # the next bar is locked at the limit-up: still waiting, now as of that bar
    append(folder, "600000", LOCKED_UP)
    bot = Bot(db, folder, "2025-09-03")
    view = await bot.call("portfolio")
    [upd] = view["order_updates"]
    assert (
        upd["status"] == "waiting" and upd["price_as_of"] == "2025-09-03" and "limit-locked" in upd["reason"]
    )
    assert [p["id"] for p in view["paper"]["pending_orders"]] == [r["id"]]

    # the bar after opens off the limit: filled at that open, once
    append(folder, "600000", OFF_LIMIT)
    bot = Bot(db, folder, "2025-09-04")
    pos = await bot.call("get_positions")
    [upd] = pos["order_updates"]
    assert upd["status"] == "filled" and upd["price"] == 12.5 and upd["price_as_of"] == "2025-09-04"
    assert upd["trade_date"] == "2025-09-04" and "2025-09-04 open" in upd["reason"]
    assert pos["pending"] == [] and [(p["symbol"], p["quantity"]) for p in pos["paper"]] == [("600000", 1000)]
    cash = (await bot.call("get_balance"))["balances"][0]["cash"]
    assert cash == pytest.approx(1_000_000 - 12_500 - upd["fee"], abs=0.01)
    # further calls, another run, the same approved call replayed: nothing fills again
    assert "order_updates" not in await bot.call("portfolio")
    again = await Bot(db, folder, "2025-09-05").call(
        "execute_trade", {"code": "600000", "side": "buy", "quantity": 1000}, call_id="c1"
    )
    assert again["replayed"] and again["status"] == "filled"
    assert [(t["symbol"], t["quantity"]) for t in await filled(db, folder)] == [("600000", 1000)]
    assert (await Bot(db, folder, "2025-09-05").call("get_balance"))["balances"][0]["cash"] == cash


async def test_concurrent_retries_fill_exactly_once(db, folder):
    await Bot(db, folder, "2025-09-02").broker().submit("u1", "600000", "buy", 1000, key="k")
    append(folder, "600000", NEXT_OPEN)
    bots = [Bot(db, folder, "2025-09-03").broker() for _ in range(4)]
    results = await asyncio.gather(*(b.retry_waiting() for b in bots))
    assert sum(len(r) for r in results) == 1
    assert len(await filled(db, folder)) == 1
    assert await bots[0].retry_waiting() == []


async def test_cancel_goes_through_approval_and_stops_the_retry(db, folder):
    assert market_tools.get("cancel_order").spec.requires_approval
    bot = Bot(db, folder, "2025-09-02")
    r = await bot.call("execute_trade", {"code": "600000", "side": "buy", "quantity": 1000})
    with pytest.raises(MarketError, match="no order") as other:
        await bot.call("cancel_order", {"order_id": r["id"]}, user="u2")  # not someone else's
    assert "instrument" not in str(other.value)  # says what is missing: the order
    with pytest.raises(MarketError, match=r"^no order #99999 of yours on the paper account$"):
        await bot.call("cancel_order", {"order_id": 99999})
    c = await bot.call("cancel_order", {"order_id": r["id"]}, call_id="x1")
    assert c["order"]["status"] == "cancelled" and "cancelled" in c["note"]
    again = await bot.call("cancel_order", {"order_id": r["id"]}, call_id="x1")  # a replayed approval
    assert again["order"]["status"] == "cancelled" and again["replayed"]
    append(folder, "600000", NEXT_OPEN)
    bot = Bot(db, folder, "2025-09-03")
    assert (await bot.call("portfolio"))["paper"]["pending_orders"] == []
    assert await filled(db, folder) == []
    # a filled order cannot be cancelled
    f = await bot.call("execute_trade", {"code": "600036", "side": "buy", "quantity": 100})
    assert f["status"] == "filled"
    with pytest.raises(MarketError, match="filled"):
        await bot.call("cancel_order", {"order_id": f["id"]})


async def test_insufficient_cash_at_the_retry_is_rejected_and_reported(db, folder):
    bot = Bot(db, folder, "2025-09-02", initial_cash_cn=15_000)
    r = await bot.call("execute_trade", {"code": "600000", "side": "buy", "quantity": 1000})
    assert r["status"] == "waiting"  # 11,000 + fees fit at placement
    spend = await bot.call("execute_trade", {"code": "600036", "side": "buy", "quantity": 200})
    assert spend["status"] == "filled"  # ~4,040 + fees: ~10,950 left, less than the 11,500 needed
    append(folder, "600000", NEXT_OPEN)
    out = await Bot(db, folder, "2025-09-03", initial_cash_cn=15_000).call("get_trade_history")
    [upd] = out["order_updates"]
    assert upd["id"] == r["id"] and upd["status"] == "rejected"
    assert "insufficient cash" in upd["reason"] and "2025-09-03 open" in upd["reason"]
    assert [t["symbol"] for t in await filled(db, folder)] == ["600036"]


async def test_a_sell_blocked_at_limit_down_respects_t_plus_1_at_fill_time(db, folder):
    write(folder, "600000", [BASE[0], ("2025-09-02", 9.5, 9.6, 9.0, 9.0)])  # closes at limit-down 9.00
    bot = Bot(db, folder, "2025-09-02")
    b = await bot.call("execute_trade", {"code": "600000", "side": "buy", "quantity": 1000})
    assert b["status"] == "filled"  # a buy at the limit-down close is allowed
    s = await bot.call("execute_trade", {"code": "600000", "side": "sell", "quantity": 1000})
    assert s["status"] == "waiting" and "limit-down" in s["reason"]
    append(folder, "600000", ("2025-09-03", 9.2, 9.4, 8.9, 9.1))
    # the new bar is there but the wall clock is still the buying session: T+1 rejects at the retry
    same = await Bot(db, folder, "2025-09-02", hour=6).call("portfolio")  # 14:00, before the close
    [upd] = same["order_updates"]
    assert upd["status"] == "rejected" and "T+1" in upd["reason"]

    s2 = await Bot(db, folder, "2025-09-03").call(
        "execute_trade", {"code": "600000", "side": "sell", "quantity": 1000}
    )
    assert s2["status"] == "filled" and s2["price"] == 9.1  # no newer bar: the last close, as usual


async def test_a_sell_waits_and_fills_on_the_next_session(db, folder):
    write(folder, "600000", [BASE[0], ("2025-09-02", 9.5, 9.6, 9.0, 9.0)])
    await Bot(db, folder, "2025-09-01").call(
        "execute_trade", {"code": "600000", "side": "buy", "quantity": 500}
    )
    # (bought in the 09-01 session at the last close; sold in the 09-02 session)
    s = await Bot(db, folder, "2025-09-02").call(
        "execute_trade", {"code": "600000", "side": "sell", "quantity": 500}
    )
    assert s["status"] == "waiting"
    append(folder, "600000", ("2025-09-03", 9.2, 9.4, 8.9, 9.1))
    upd = await Bot(db, folder, "2025-09-03").broker().retry_waiting("u1")
    assert [(u["status"], u["price"], u["realized_pnl"] is not None) for u in upd] == [("filled", 9.2, True)]
    pos = await Bot(db, folder, "2025-09-03").call("get_positions")
    assert pos["paper"] == [] and pos["pending"] == []


async def test_sells_of_shares_not_held_are_rejected_at_once_not_kept(db, folder):
    write(folder, "600000", [BASE[0], ("2025-09-02", 9.5, 9.6, 9.0, 9.0)])
    r = await Bot(db, folder, "2025-09-02").call(
        "execute_trade", {"code": "600000", "side": "sell", "quantity": 100}
    )
    assert r["status"] == "rejected" and "insufficient holding" in r["reason"]
    odd = await Bot(db, folder, "2025-09-02").call(
        "execute_trade", {"code": "600000", "side": "buy", "quantity": 150}
    )
    assert odd["status"] == "rejected" and "lots" in odd["reason"]


async def test_retry_can_be_switched_off(db, folder):
    bot = Bot(db, folder, "2025-09-02", retry_blocked=False)
    r = await bot.call("execute_trade", {"code": "600000", "side": "buy", "quantity": 1000})
    assert r["status"] == "rejected" and "place the order again" in r["reason"]
    assert (await bot.call("portfolio"))["paper"]["pending_orders"] == []


async def test_the_daily_job_retries_waiting_orders(db, folder):
    from markets.strategies import run_all_traders

    await Bot(db, folder, "2025-09-02").broker().submit("u1", "600000", "buy", 1000, key="k")
    append(folder, "600000", NEXT_OPEN)
    await run_all_traders(Bot(db, folder, "2025-09-03").svc)  # no trader runs; the hook still retries
    assert [(t["symbol"], t["price"]) for t in await filled(db, folder)] == [("600000", 11.5)]


# ---- the walk over new bars is the backtester's rule ------------------------------------------------
def bars_of(rows) -> Bars:
    a = np.array(rows, dtype=float)
    dates = (np.datetime64("2024-01-01") + np.arange(len(a))).astype("datetime64[D]")
    return Bars("600000", dates, a[:, 0], a[:, 1], a[:, 2], a[:, 3], np.full(len(a), 1e6))


@settings(max_examples=200)
@given(
    moves=st.lists(st.tuples(st.integers(-10, 10), st.booleans()), min_size=2, max_size=12),
    side=st.sampled_from(["buy", "sell"]),
)
def test_the_paper_retry_fills_where_the_backtester_fills_property(moves, side):
    # Opens move by whole percents (±10 % = the limit) from the previous close; a one-price bar sits
    # at its open. Bar 0's close blocked the order; the paper broker's walk over the newer bars must
    # pick the same bar as the backtester's pending order (signal at bar 0, retried at each open).
    rows, prev = [(10.0, 10.0, 10.0, 10.0)], 10.0
    for pct, one_price in moves:
        o = round(prev * (1 + pct / 100) + 1e-9, 2)
        rows.append((o, o, o, o) if one_price else (o, round(o * 1.01, 2), round(o * 0.99, 2), o))
        prev = o
    b = bars_of(rows)
    k, why, last = first_open_off_the_limit(b, b.dates[0].astype(object), side, 0.10)
    assert last == len(rows) - 1
    p = Panel.from_bars({"600000": b})
    sig = np.zeros((1, len(rows)), dtype=bool)
    sig[0, 0] = True
    if side == "buy":
        r = run(p, rules=MarketRules.cn(), cfg=NO_EXITS, entries=sig, limits=np.array([0.10]))
        got = [f["date"] for f in r.fills if f["side"] == "buy"]
    else:  # hold from before bar 0 (an explicit buy at the open of bar 0), exit signal at bar 0
        from markets.backtest import Order

        r = run(
            p,
            rules=MarketRules.cn(),
            cfg=NO_EXITS,
            exits=sig,
            orders=[Order(0, "600000", "buy", quantity=100, at="open")],
            limits=np.array([0.10]),
        )
        got = [f["date"] for f in r.fills if f["side"] == "sell"]
    assert got == ([] if k is None else [str(b.dates[k])])
    if k is None:
        assert why is not None and ("limit" in why)
    else:
        down, up = limit_prices(rows[k - 1][3], 0.10)
        assert (rows[k][0] < up - 1e-9) if side == "buy" else (rows[k][0] > down + 1e-9)


NO_EXITS = BacktestConfig(initial_cash=100_000, stop_pct=None, trail_after=None, max_hold=None)


# ---- traders' keys: the wall-clock session, not the bar date ----------------------------------------
async def test_a_trader_on_frozen_data_trades_once_per_session_not_once_in_total(db):
    md = MarketData()  # the bundled data: frozen at 2025-09-03
    store = StrategyStore(db)
    await store.create(
        "u1", "bh", {"universe": ["600519"], "entry": "buy_and_hold", "stop_pct": None, "position_pct": 0.5}
    )
    await store.create_trader("u1", "bot", "bh")
    await store.update_trader("u1", "bot", status="running")

    async def step(day: str) -> dict:
        return await run_trader_once(store, PaperBroker(db, md, clock=at(day)), md, "u1", "bot")

    first = await step("2026-12-03")
    again = await step("2026-12-03")  # a double-fired job in the same session
    assert first["session"] == "2026-12-03" and first["as_of"] == "2025-09-03"
    assert [o["status"] for o in first["orders"]] == ["filled"]
    assert not [o for o in again["orders"] if not o["replayed"]]
    # the next session: a new key. Held now, so buy-and-hold sends nothing; sell it by hand and the
    # trader's still-standing entry buys again that session — the point is that a new session trades.
    pf = PaperBroker(db, md, clock=at("2026-12-04"))
    qty = first["orders"][0]["quantity"]
    assert (await pf.submit("u1", "600519", "sell", qty, key="m")).status == "filled"
    nxt = await step("2026-12-04")
    assert nxt["session"] == "2026-12-04"
    assert [(o["status"], o["replayed"]) for o in nxt["orders"]] == [("filled", False)]
    assert (await store.traders("u1"))[0]["last_run_on"] == "2026-12-04"


async def test_the_composition_root_passes_retry_blocked_from_the_config(tmp_path):
    from bot.app import App
    from config.loader import load_settings

    env = {
        "TAPEBOT_HOME": str(tmp_path),
        "OPENAI_API_KEY": "sk-test-not-used-000000",
        "TAPEBOT_SCHEDULER__ENABLED": "false",
        "TAPEBOT_MEMORY__ENABLED": "false",
    }
    assert load_settings(tmp_path, env).markets.retry_blocked  # on by default
    app = App(load_settings(tmp_path, {**env, "TAPEBOT_MARKETS__RETRY_BLOCKED": "false"}))
    await app.start(adapters=False, scheduler=False)
    try:
        assert app.market.settings.retry_blocked is False
    finally:
        await app.stop()


async def test_a_retry_that_dies_midway_applies_nothing_and_the_next_fills_once(db, folder, monkeypatch):
    await Bot(db, folder, "2025-09-02").broker().submit("u1", "600000", "buy", 1000, key="k")
    append(folder, "600000", NEXT_OPEN)
    real_apply = PaperBroker._apply

    async def dies(self, s, t, *a, **kw):  # cash and shares moved, then the process "dies"
        await real_apply(self, s, t, *a, **kw)
        await s.flush()
        raise RuntimeError("killed in the middle of the fill")

    monkeypatch.setattr(PaperBroker, "_apply", dies)
    assert await Bot(db, folder, "2025-09-03").broker().retry_waiting() == []
    bot = Bot(db, folder, "2025-09-03")
    assert [p["status"] for p in await bot.broker().portfolio.waiting("u1")] == ["waiting"]
    assert (await bot.call("get_balance"))["balances"][0]["cash"] == 1_000_000  # nothing applied
    monkeypatch.setattr(PaperBroker, "_apply", real_apply)
    [upd] = await Bot(db, folder, "2025-09-03").broker().retry_waiting()  # the restarted bot
    assert upd["status"] == "filled" and upd["price"] == 11.5
    assert await Bot(db, folder, "2025-09-03").broker().retry_waiting() == []
    assert len(await filled(db, folder)) == 1


async def test_a_trader_sends_no_second_order_while_one_waits(db, tmp_path):
    f = tmp_path / "trader_bars"
    f.mkdir()
    days = np.arange(np.datetime64("2025-05-01"), np.datetime64("2025-09-02"))
    rows = [(str(d), 10.0, 10.2, 9.9, 10.0) for d in days[-70:]]
    write(f, "600000", [*rows, ("2025-09-02", 10.6, 11.0, 10.5, 11.0)])  # closes at limit-up
    md = MarketData([CsvFolderProvider(f)])
    store = StrategyStore(db)
    await store.create("u1", "bh", {"universe": ["600000"], "entry": "buy_and_hold", "stop_pct": None})
    await store.create_trader("u1", "bot", "bh")
    await store.update_trader("u1", "bot", status="running")
    first = await run_trader_once(store, PaperBroker(db, md, clock=at("2025-09-02")), md, "u1", "bot")
    assert [o["status"] for o in first["orders"]] == ["waiting"]
    nxt = await run_trader_once(store, PaperBroker(db, md, clock=at("2025-09-03")), md, "u1", "bot")
    assert nxt["session"] == "2025-09-03" and nxt["orders"] == []  # the waiting buy stands for it
    assert len(await PaperBroker(db, md).portfolio.waiting("u1")) == 1


async def test_the_opposite_signal_cancels_the_traders_waiting_order(db, tmp_path):
    # ma_cross 1/2: an up day after a down day crosses up, a down day after an up day crosses down.
    f = tmp_path / "cross_bars"
    f.mkdir()
    days = np.arange(np.datetime64("2025-05-01"), np.datetime64("2025-08-30"))[-70:]
    rows = [(str(d), 10.0, 10.1, 9.9, 10.0) for d in days]
    rows += [("2025-09-01", 10.0, 10.0, 9.7, 9.8), ("2025-09-02", 10.0, 10.78, 9.9, 10.78)]  # up to limit-up
    write(f, "600000", rows)
    store = StrategyStore(db)
    await store.create("u1", "x", {"universe": ["600000"], "entry": "ma_cross", "ma_fast": 1, "ma_slow": 2})
    await store.create_trader("u1", "bot", "x")
    await store.update_trader("u1", "bot", status="running")
    md = MarketData([CsvFolderProvider(f)])
    first = await run_trader_once(store, PaperBroker(db, md, clock=at("2025-09-02")), md, "u1", "bot")
    [order] = first["orders"]
    assert order["side"] == "buy" and order["status"] == "waiting"
    # next bar: opens at its limit-up (still blocked) and closes down: the down-cross cancels the buy
    append(f, "600000", ("2025-09-03", 11.86, 11.86, 10.5, 10.6))
    md = MarketData([CsvFolderProvider(f)])
    nxt = await run_trader_once(store, PaperBroker(db, md, clock=at("2025-09-03")), md, "u1", "bot")
    assert [(c["id"], c["status"]) for c in nxt["cancelled"]] == [(order["id"], "cancelled")]
    assert "opposite signal" in nxt["cancelled"][0]["reason"] and nxt["orders"] == []
    assert await PaperBroker(db, md).portfolio.waiting("u1") == []


async def test_the_account_snapshot_mentions_waiting_orders(db, folder):
    from markets.snapshots import dynamic_snapshot

    bot = Bot(db, folder, "2025-09-02")
    r = await bot.call("execute_trade", {"code": "600000", "side": "buy", "quantity": 1000})
    text = await dynamic_snapshot(bot.svc, "u1", "how is my portfolio")
    assert f"pending paper order #{r['id']}: buy 1000 600000 — pending: blocked at limit-up" in text
