"""`run_backtest`: benchmark entries (buy-and-hold, MA cross), the period the
metrics cover, and a caption that agrees with the chart."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from markets_helpers import make_sessions
from pydantic import ValidationError

from agent.tools.registry import Deps, ToolContext
from markets import charts
from markets.data import MarketData
from markets.services import MarketServices
from markets.strategies import StrategyConfig, ma_cross
from markets.tools import market_tools

MD = MarketData()


@pytest.fixture
async def ctx(tmp_path):
    engine, sessions = await make_sessions(tmp_path)
    svc = MarketServices(data=MD, session_factory=sessions, results_dir=tmp_path / "results")
    yield lambda: ToolContext(call_id="c1", session_id="s1", user_id="u1", deps=Deps(svc))
    await engine.dispose()


async def backtest(ctx, **args):
    return await market_tools.get("run_backtest").call(ctx(), args)


def test_config_accepts_benchmark_entries():
    assert StrategyConfig(entry="buy_and_hold").entry == "buy_and_hold"
    assert StrategyConfig.model_validate({"entry": ["ma_cross"]}).entry == "ma_cross"
    assert StrategyConfig.model_validate({"entry": "spring"}).entry == ["spring"]
    with pytest.raises(ValidationError):
        StrategyConfig.model_validate({"entry": "coin_flip"})
    with pytest.raises(ValidationError):
        StrategyConfig.model_validate({"entry": "ma_cross", "ma_fast": 30, "ma_slow": 10})


def test_ma_cross_uses_the_last_nonzero_difference():
    close = np.array([[5, 5, 5, 5, 4, 4, 6, 6, 6, 3.0]])
    up, down = ma_cross(close, 1, 3)
    # fast = close, slow = 3-bar mean. Differences from bar 2: 0, 0, -.67, -.33, 1.33, .67, 0, -2.
    # Bar 4 is no cross (no earlier side: the differences before it are 0); bar 6 crosses up; bar 9
    # crosses down, measured against bar 7 (bar 8's difference is 0) — backtrader's CrossOver rule.
    assert np.flatnonzero(up[0]).tolist() == [6] and np.flatnonzero(down[0]).tolist() == [9]


async def test_buy_and_hold_from_the_first_bar_buys_on_that_bar(ctx):
    # 002229's data starts 2023-08-14 (open 35.88): a start on that bar buys at its open, not the
    # next bar's (41.00)
    for start in ("2023-08-14", "2023-01-01"):
        out = (await backtest(ctx, codes=["002229"], config={"entry": "buy_and_hold"}, start=start)).content
        assert out["start"] == "2023-08-14"
        assert out["blocked_orders"] == 0 and out["trades_total"] == 1 and out["rejected_orders"] == 0
        [trip] = out["trades"]
        assert (
            trip["entry_date"] == "2023-08-14" and trip["entry_price"] == 35.88 and trip["exit_date"] is None
        )


async def test_whole_universe_buy_and_hold_buys_every_stock_on_its_first_bar(ctx):
    b = await backtest(ctx, config={"entry": "buy_and_hold"}, start="2024-04-03")
    out = b.content
    assert out["universe"] == 300 and out["trades_total"] == 300
    assert out["rejected_orders"] == 0 and out["blocked_orders"] == 0
    saved = json.loads(Path(out["saved_to"]).read_text("utf-8"))
    assert saved["metrics"]["open_positions"] == 300


async def test_whole_universe_buy_and_hold_reports_what_cash_cannot_buy(ctx):
    # 200,000 cannot buy one lot of each of the 300 stocks: the dearest are reported, never skipped
    out = (
        await backtest(ctx, config={"entry": "buy_and_hold"}, start="2024-04-03", initial_cash=200_000)
    ).content
    assert out["rejected_orders"] > 0 and out["trades_total"] + out["rejected_orders"] == 300
    assert all("unaffordable: one lot costs" in r["reason"] for r in out["rejected_examples"])
    assert out["metrics"]["final_equity"] > 0


async def test_summary_reports_the_period_the_metrics_cover(ctx, monkeypatch):
    seen = {}
    real = charts.equity_curve

    def spy(dates, equity, out_dir, **kw):
        seen.update(dates=dates, equity=equity, benchmark=kw.get("benchmark"))
        return real(dates, equity, out_dir, **kw)

    monkeypatch.setattr(charts, "equity_curve", spy)
    b = await backtest(ctx, codes=["600519", "000001"], config={"entry": "buy_and_hold"}, start="2024-01-01")
    out = b.content
    assert out["start"] == "2024-01-02" and out["warmup_from"] == "2023-08-14" and out["end"] == "2025-09-03"
    assert {t["entry_date"] for t in out["trades"]} == {"2024-01-02"}  # bought on the first bar of the period
    m = out["metrics"]
    # the chart and the caption show the same figures
    eq, bench = seen["equity"], seen["benchmark"]
    assert round((eq[-1] / eq[0] - 1) * 100, 2) == m["total_return_pct"]
    ok = bench[~np.isnan(bench)]
    assert round((ok[-1] / ok[0] - 1) * 100, 2) == m["benchmark_return_pct"]
    caption = b.attachments[0].caption
    figures = [float(x) for x in re.findall(r"(-?\d+\.\d+)%", caption)]
    assert figures == [m["total_return_pct"], m["benchmark_return_pct"]]
    assert "2024-01-02" in caption and "2025-09-03" in caption


async def test_default_period_chart_matches_metrics(ctx, monkeypatch):
    # no start: the warm-up is chosen by the tool; the chart must still start where the metrics do
    seen = {}
    real = charts.equity_curve

    def spy(dates, equity, out_dir, **kw):
        seen.update(dates=dates, benchmark=kw.get("benchmark"))
        return real(dates, equity, out_dir, **kw)

    monkeypatch.setattr(charts, "equity_curve", spy)
    b = await backtest(ctx, codes=["600519"], config={"entry": "ma_cross", "ma_fast": 5, "ma_slow": 20})
    out = b.content
    ok = seen["benchmark"][~np.isnan(seen["benchmark"])]
    assert round((ok[-1] / ok[0] - 1) * 100, 2) == out["metrics"]["benchmark_return_pct"]
    assert str(seen["dates"][1]) == out["start"]
    assert out["config"]["stop_pct"] is None and out["trades_total"] > 1


async def test_btc_runs_under_crypto_rules_without_being_told(ctx):
    out = (await backtest(ctx, codes=["BTC"], config={"entry": "buy_and_hold"})).content
    assert out["config"]["market"] == "crypto" and out["rules"].startswith("crypto: fractional")
    assert f"as of {MD.as_of('crypto')} (" in out["source"]  # BTC's own date (and age), not the A-shares'
    assert MD.as_of("crypto") != MD.as_of("cn")
    assert "benchmark_return_pct" not in out["metrics"]  # no CSI 300 beside a coin
    [trip] = out["trades"]
    qty, price = trip["quantity"], trip["entry_price"]
    assert qty != int(qty)  # fractional, no lots of 100
    # all-in: what is left is less than one size step and a cent of fee rounding
    spent = qty * price * 1.001
    assert 1_000_000 - spent < price * 1e-6 + 0.01


async def test_a_market_contradicting_the_codes_is_an_error(ctx):
    from agent.errors import ToolError

    for args in (
        {"codes": ["BTC"], "config": {"entry": "buy_and_hold", "market": "cn"}},
        {"codes": ["BTC", "600519"], "config": {"entry": "buy_and_hold"}},
    ):
        with pytest.raises(ToolError) as e:
            await backtest(ctx, **args)
        assert "crypto" in str(e.value)


async def test_the_result_states_how_st_was_decided(ctx):
    out = (await backtest(ctx, codes=["002602", "600000"], config={"entry": "buy_and_hold"})).content
    assert "ST华通(002602)" in out["st"] and "no ST history" in out["st"]
