"""Live providers behind the local bar store: as-of dates, the index, the universe and refreshes
follow the provider's newest bars (stand-ins answer in akshare's, yfinance's and ccxt's own
shapes: tests/fakes/market_libs.py), and the stored bars still answer, with their age, when the
provider is unreachable."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import numpy as np
import pytest

from markets.data import MarketData
from markets.errors import NoData
from markets.providers.bundled import BundledProvider
from markets.providers.network import AkshareProvider, CcxtProvider, YFinanceProvider
from markets.providers.stored import StoredProvider
from markets.refresh import refresh_market
from markets.services import MarketServices, MarketSettings, build_market_data
from markets.store import BarStore
from markets.toolset import age_note, data_dates, source_note
from tests.fakes.clock import FakeClock
from tests.fakes.market_libs import FakeAkshare, FakeCcxtExchange, FakeCcxtModule, FakeYfinance

NOW = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)


def live_md(tmp_path, ak: FakeAkshare, clock: FakeClock | None = None) -> MarketData:
    store = BarStore(tmp_path / "bars")
    return MarketData(
        [
            StoredProvider(AkshareProvider(module=ak), store, clock=(clock or FakeClock(NOW)).now),
            BundledProvider(),
        ]
    )


def test_akshare_recorded_shape_parses_to_canonical_units(tmp_path):
    ak = FakeAkshare()
    md = live_md(tmp_path, ak)
    b = md.bars("600519")
    raw = ak.stock_zh_a_hist("600519", start_date="19900101", end_date="20991231").to_dict("records")
    assert isinstance(raw[0]["日期"], date) and raw[0]["成交量"].dtype == np.int64  # the library's types
    assert b.last_date == date(2026, 12, 4) and len(b) == 300
    assert b.volume[-1] == float(raw[-1]["成交量"]) * 100  # lots → shares
    assert b.close[-1] == float(raw[-1]["收盘"]) and b.amount[-1] == float(raw[-1]["成交额"])


def test_as_of_index_and_source_follow_the_provider_not_the_bundle(tmp_path):
    md = live_md(tmp_path, FakeAkshare())
    assert md.as_of("cn") == date(2025, 9, 3)  # nothing stored yet: the bundled date
    md.bars("600519")
    assert md.as_of("cn") == date(2026, 12, 4)
    idx = md.index_bars("000300")
    assert idx.last_date == date(2026, 12, 4) and idx.source == "akshare" and idx.market == "index"
    sse = md.index_bars("000001")  # the Shanghai Composite, not Ping An Bank
    assert sse.last_date == date(2026, 12, 4) and sse.close[-1] != md.bars("000001").close[-1]
    svc = MarketServices(data=md, clock=FakeClock(NOW).now)
    assert source_note(svc) == "akshare+bundled daily bars, as of 2026-12-04 (2 days old)"


def test_every_date_carries_its_age_by_the_injected_clock():
    md = MarketData()  # the bundled data: 2025-09-03
    svc = MarketServices(data=md, clock=FakeClock(datetime(2026, 12, 6, 9, 0, tzinfo=UTC)).now)
    assert source_note(svc) == "bundled daily bars, as of 2025-09-03 (459 days old)"
    assert age_note(date(2026, 12, 5), NOW) == "2026-12-05 (1 day old)"
    assert age_note("2026-12-06", NOW) == "2026-12-06 (today)"
    assert age_note(date(2025, 9, 3), NOW, "zh") == "2025-09-03（459 天前）"
    assert data_dates(svc, NOW) == "A-shares 2025-09-03 (459 days old), crypto 2025-07-13 (511 days old)"
    assert data_dates(svc, NOW, "zh").startswith("A股 2025-09-03（459 天前）")


def test_the_universe_is_the_providers_stock_list(tmp_path):
    ak = FakeAkshare()
    md = live_md(tmp_path, ak)
    assert len(md.universe("cn")) == 300  # before any refresh: the bundled set
    report = refresh_market(md, "cn", full_list=True)
    assert report.listed == 3 and not report.failed
    assert sorted(i.symbol for i in md.universe("cn")) == ["000001", "300750", "600519"]
    assert report.as_of == date(2026, 12, 4)
    assert set(report.updated) >= {"index 000300", "index 000001", "600519"}
    panel = md.panel(min_bars=60)
    assert str(panel.dates[-1]) == "2026-12-04"


def test_stored_bars_answer_when_the_provider_is_unreachable(tmp_path):
    ak = FakeAkshare()
    clock = FakeClock(NOW)
    md = live_md(tmp_path, ak, clock)
    first = md.bars("600519")
    ak.fail = ConnectionError("Eastmoney unreachable")
    clock.advance(days=2)  # the stored copy is due for a refresh; the refresh fails
    again = md.bars("600519")
    assert again.last_date == first.last_date and np.array_equal(again.close, first.close)
    calls = len(ak.calls)
    md.bars("600519")  # within the back-off: no second network attempt
    assert len(ak.calls) == calls
    assert md.bars("300750").source == "bundled"  # never stored, provider down: the next provider
    alone = MarketData([md.providers[0]])
    with pytest.raises(NoData, match=r"no bars of .* are stored"):
        alone.bars("300750")  # and with none behind it, a clear error


def test_a_new_process_reads_the_store_without_the_network(tmp_path):
    ak = FakeAkshare()
    live_md(tmp_path, ak).bars("600519")
    ak2 = FakeAkshare()
    md2 = live_md(tmp_path, ak2)
    assert md2.as_of("cn") == date(2026, 12, 4) and md2.bars("600519").last_date == date(2026, 12, 4)
    assert ak2.calls == []  # fresh enough: answered from the files


def test_refresh_appends_new_bars_and_refetches_re_adjusted_history(tmp_path):
    ak = FakeAkshare(end=date(2026, 12, 3))
    clock = FakeClock(NOW)
    md = live_md(tmp_path, ak, clock)
    p = md.providers[0]
    assert isinstance(p, StoredProvider)
    inst = md.resolve("600519")
    md.bars(inst)
    ak.end = date(2026, 12, 4)
    ak.calls.clear()
    b = p.refresh(inst)
    assert b.last_date == date(2026, 12, 4) and len(b) == 301
    assert len(ak.calls) == 1 and ak.calls[0][1]["start_date"] != "19900101"  # only the newest days
    ak.bump["600519"] = 0.97  # an ex-dividend day re-adjusts every qfq price
    ak.calls.clear()
    b2 = p.refresh(inst)
    assert [c[1]["start_date"] for c in ak.calls][-1] == "19900101"  # the whole history again
    assert b2.close[0] == pytest.approx(b.close[1] * 0.97, abs=0.011)


def test_yfinance_and_ccxt_recorded_shapes_through_the_store(tmp_path):
    store = BarStore(tmp_path / "bars")
    yf = FakeYfinance()
    ex = FakeCcxtExchange()
    md = MarketData(
        [
            StoredProvider(CcxtProvider(module=FakeCcxtModule(ex)), store, clock=FakeClock(NOW).now),
            StoredProvider(YFinanceProvider(module=yf), store, clock=FakeClock(NOW).now),
            BundledProvider(),
        ]
    )
    idx = md.index_bars("000300")
    assert yf.calls[-1] == "000300.SS" and idx.last_date == date(2026, 12, 4)
    assert md.bars("600519").volume[-1] == 1_000_119  # shares as Yahoo gives them
    btc = md.bars("BTC")
    assert btc.source == "ccxt" and btc.last_date is not None and btc.last_date >= date(2026, 12, 4)
    assert md.as_of("crypto") == btc.last_date


def test_build_market_data_keeps_network_bars_under_the_data_dir(tmp_path, monkeypatch):
    import sys

    ak = FakeAkshare()
    monkeypatch.setitem(sys.modules, "akshare", ak)
    md = build_market_data(
        MarketSettings(providers=["akshare", "bundled"], data_dir=str(tmp_path)), clock=FakeClock(NOW).now
    )
    assert isinstance(md.providers[0], StoredProvider)
    assert md.bars("600519").last_date == date(2026, 12, 4)
    assert (tmp_path / "bars" / "akshare" / "cn" / "600519.csv").is_file()


async def test_a_waiting_paper_order_is_retried_at_the_providers_next_bar(tmp_path):
    from markets_helpers import make_sessions

    from markets.broker import PaperBroker

    ak = FakeAkshare(end=date(2026, 12, 3))
    prev = float(ak.stock_zh_a_hist("600519", end_date="20261202").to_dict("records")[-1]["收盘"])
    limit = round(prev * 1.1, 2)  # 600519 (main board): closes at its limit-up on 2026-12-03
    ak.rows_override[("600519", date(2026, 12, 3))] = {
        "开盘": round(prev * 1.05, 2), "最高": limit, "最低": round(prev * 1.04, 2), "收盘": limit,
    }  # fmt: skip
    clock = FakeClock(datetime(2026, 12, 3, 7, 10, tzinfo=UTC))  # 15:10 in Shanghai: 12-03 has closed
    md = live_md(tmp_path, ak, clock)
    engine, sessions = await make_sessions(tmp_path)
    try:
        broker = PaperBroker(sessions, md, MarketSettings(), clock=clock.now)
        r = await broker.submit("u1", "600519", "buy", 100, key="k1")
        assert r.status == "waiting"
        ak.end = date(2026, 12, 4)  # the after-close refresh brings the next session's bar
        clock.set(datetime(2026, 12, 4, 8, 0, tzinfo=UTC))
        refresh_market(md, "cn")
        [upd] = await PaperBroker(sessions, md, MarketSettings(), clock=clock.now).retry_waiting()
        next_open = float(md.bars("600519").open[-1])
        assert upd["status"] == "filled" and upd["price"] == next_open and upd["price_as_of"] == "2026-12-04"
    finally:
        await engine.dispose()


async def test_the_overview_reads_the_providers_index_universe_and_dates(tmp_path):
    from agent.tools.registry import Deps, ToolContext
    from markets.tools import market_tools

    md = live_md(tmp_path, FakeAkshare())
    refresh_market(md, "cn", full_list=True)
    svc = MarketServices(data=md, clock=FakeClock(NOW).now)
    out = await market_tools.get("get_market_overview").call(ToolContext(deps=Deps(svc)), {})
    assert out["as_of"] == "2026-12-04" and out["breadth"]["universe"] == 3
    assert out["index"]["close"] == round(float(md.index_bars("000300").close[-1]), 2)
    assert out["source"] == "akshare+bundled daily bars, as of 2026-12-04 (2 days old)"
    assert "3 A-shares from akshare+bundled" in out["note"]


def test_a_universe_panel_never_fetches_symbol_by_symbol(tmp_path):
    ak = FakeAkshare()
    clock = FakeClock(NOW)
    md = live_md(tmp_path, ak, clock)
    refresh_market(md, "cn", full_list=True)
    clock.advance(days=3)  # every stored copy is past its ttl
    ak.calls.clear()
    panel = md.panel(min_bars=60)
    assert ak.calls == [] and len(panel.symbols) == 3  # read from the files as they are
    md.bars("600519")  # a single symbol asked for is brought up to date
    assert [c[0] for c in ak.calls] == ["stock_zh_a_hist"]


def test_processes_sharing_the_store_see_and_keep_each_others_writes(tmp_path):
    """The bot and `tapebot data update` (two BarStores on one folder, as two processes have): a
    refresh by one is seen by the other at once, and neither writes its older copy back over the
    other's — not the dates, not the stock list, not inside a batch."""
    stocks = {"600519": "贵州茅台", "000001": "平安银行", "300750": "宁德时代", "601318": "中国平安"}
    ak = FakeAkshare(end=date(2026, 12, 3), stocks=stocks)
    bot, cron = BarStore(tmp_path / "bars"), BarStore(tmp_path / "bars")
    p_bot = StoredProvider(AkshareProvider(module=ak), bot, clock=FakeClock(NOW).now)
    p_cron = StoredProvider(AkshareProvider(module=ak), cron, clock=FakeClock(NOW).now)
    inst = MarketData().resolve
    p_bot.bars(inst("600519"))
    assert bot.last("akshare", "cn") == date(2026, 12, 3)

    ak.end = date(2026, 12, 4)
    p_cron.refresh(inst("600519"))
    assert p_cron.refresh_stock_list() == 4
    assert bot.last("akshare", "cn") == date(2026, 12, 4)  # the bot sees the other process's refresh
    assert len(bot.stock_list("akshare")) == 4

    p_bot.refresh(inst("000001"))  # the bot writes its own: the other's entries and list stay
    with cron.batch():  # a long refresh in the other process while the bot writes
        p_cron.refresh(inst("300750"))
        p_bot.refresh(inst("601318"))
    fresh = BarStore(tmp_path / "bars")
    assert {i.symbol: i.last for i in fresh.infos("akshare", "cn")} == dict.fromkeys(
        stocks, date(2026, 12, 4)
    )
    assert len(fresh.stock_list("akshare")) == 4


async def test_regime_and_the_backtest_benchmark_use_the_providers_index(tmp_path):
    from agent.tools.registry import Deps, ToolContext
    from markets.tools import market_tools
    from tests.markets.markets_helpers import make_sessions

    md = live_md(tmp_path, FakeAkshare())
    refresh_market(md, "cn", full_list=True)
    engine, sessions = await make_sessions(tmp_path)
    try:
        svc = MarketServices(
            data=md, session_factory=sessions, results_dir=tmp_path / "r", clock=FakeClock(NOW).now
        )
        ctx = ToolContext(call_id="c1", session_id="s1", user_id="u1", deps=Deps(svc))
        regime = await market_tools.get("market_regime").call(ctx, {})
        idx = md.index_bars("000300")
        assert regime["as_of"] == "2026-12-04" and idx.source == "akshare"
        assert regime["index"]["close"] == pytest.approx(float(idx.close[-1]), abs=0.01)

        bt = await market_tools.get("run_backtest").call(
            ctx, {"codes": ["600519"], "config": {"entry": "buy_and_hold"}, "start": "2026-06-01"}
        )
        out = bt.content if hasattr(bt, "content") else bt
        data = out if isinstance(out, dict) else json.loads(out)
        first = float(idx.between(None, "2026-05-31").close[-1])  # the close before the start
        want = round((float(idx.close[-1]) / first - 1) * 100, 2)
        assert data["metrics"]["benchmark_return_pct"] == pytest.approx(want, abs=0.02)
        assert "2026-12-04" in json.dumps(data, ensure_ascii=False)
    finally:
        await engine.dispose()


def test_a_bar_of_a_session_still_trading_is_not_stored_as_a_close(tmp_path):
    """Eastmoney and Yahoo serve today's bar during the session (its close the latest price): the
    store keeps the settled bars only — until 15:00 Beijing for A-shares and indexes, until the UTC
    day ends for crypto."""
    from zoneinfo import ZoneInfo

    sh = ZoneInfo("Asia/Shanghai")
    mon = date(2026, 12, 7)
    ak = FakeAkshare(end=mon)
    clock = FakeClock(datetime(2026, 12, 7, 10, 5, tzinfo=sh))
    md = live_md(tmp_path, ak, clock)
    assert md.bars("600519").last_date == date(2026, 12, 4)
    assert md.index_bars("000300").last_date == date(2026, 12, 4)
    clock.set(datetime(2026, 12, 7, 15, 0, tzinfo=sh))  # the close: Monday's bar is settled
    refresh_market(md, "cn")
    assert md.bars("600519").last_date == mon and md.index_bars("000300").last_date == mon

    ex = FakeCcxtExchange(end=date(2026, 12, 5))  # the exchange's open daily candle is in its answer
    late = FakeClock(datetime(2026, 12, 5, 23, 59, tzinfo=UTC)).now
    ccxt = StoredProvider(CcxtProvider(module=FakeCcxtModule(ex)), BarStore(tmp_path / "c"), clock=late)
    assert MarketData([ccxt, BundledProvider()]).bars("BTC/USDT").last_date == date(2026, 12, 4)
