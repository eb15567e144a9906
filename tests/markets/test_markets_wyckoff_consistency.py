"""A consistent Wyckoff read: one analysis window for analysis and chart, volume
rules skipped without volume, one as-of date per instrument, the screen's triggers from the same
engine call as `analyze_stock`, failed springs, ST bounds, no gap-down upthrusts."""

from __future__ import annotations

import json
from datetime import date

import numpy as np
import pytest
from markets_helpers import Builder, accumulation

from markets import charts
from markets.data import MarketData
from markets.screen import ScreenConfig, screen, triggers_of
from markets.wyckoff import analyze

MD = MarketData()


@pytest.fixture(scope="module")
def all_analyses():
    out = []
    for inst in MD.universe("cn"):
        bars = MD.bars(inst)
        try:
            out.append((bars.tail(500), analyze(bars, MD.resolve(inst.symbol))))
        except ValueError:
            continue
    assert len(out) >= 290
    return out


# ---- one window -----------------------------------------------------------------------------------
@pytest.mark.parametrize("code", ["BTC", "ETH", "600519"])
def test_chart_marks_every_event_of_any_series_length(tmp_path, code):
    inst = MD.resolve(code)
    bars = MD.bars(inst)
    a = analyze(bars, inst)
    shown = charts.overlay(bars, a, last=160)
    visible = [e for e in a.events if e.date >= shown.first_date]
    assert visible, "the analysis should have recent events to draw"
    assert [(x, k) for x, k, _ in shown.markers] == [(shown.x_of(e.date), e.kind) for e in visible]
    for x, _, d in shown.markers:
        assert shown.dates[x] == np.datetime64(d)  # each marker sits on its own bar
    if a.range is not None:
        x0, x1 = shown.span
        assert shown.dates[x1] == np.datetime64(a.range.end_date)
        assert x0 == 0 or shown.dates[x0] == np.datetime64(a.range.start_date)
    assert charts.candles(bars, tmp_path, name=inst.name, analysis=a).stat().st_size > 10_000


def test_analysis_states_its_window():
    inst = MD.resolve("BTC")
    a = analyze(MD.bars(inst), inst)
    d = a.to_dict()
    assert d["window"]["bars"] == 500 and d["window"]["to"] == str(a.as_of)
    assert d["window"]["from"] == str(MD.bars(inst).tail(500).dates[0])


# ---- one as-of date per instrument -----------------------------------------------------------------
def test_the_index_has_the_stocks_as_of_date_everywhere():
    idx = MD.resolve("沪深300")
    assert MD.bars(idx).last_date == MD.as_of("cn") == date(2025, 9, 3)
    assert analyze(MD.bars(idx), idx).as_of == date(2025, 9, 3)


async def test_every_tool_states_the_same_as_of_date_for_the_index(tmp_path):
    from agent.tools.registry import Deps, ToolContext
    from markets.services import MarketServices
    from markets.tools import market_tools

    deps = Deps(MarketServices(data=MD, results_dir=tmp_path))
    seen = {}
    for tool, args in (
        ("analyze_stock", {"code": "沪深300", "chart": True}),
        ("get_market_price", {"code": "000300"}),
        ("get_market_history", {"code": "CSI300"}),
    ):
        out = await market_tools.get(tool).call(ToolContext(call_id="c", session_id="s", deps=deps), args)
        body = getattr(out, "content", out)
        seen[tool] = body["as_of"]
        if tool == "analyze_stock":
            assert "2025-09-03" in out.attachments[0].caption
    assert set(seen.values()) == {"2025-09-03"}, seen


# ---- no volume --------------------------------------------------------------------------------------
def test_volume_rules_are_skipped_and_said_so_without_volume():
    idx = MD.resolve("沪深300")
    a = analyze(MD.bars(idx), idx)
    text = json.dumps(a.to_dict(), allow_nan=False, ensure_ascii=False)  # no NaN anywhere
    assert "nan" not in text.lower()
    assert not {e.kind for e in a.events} & {"SC", "BC", "ST", "EvR", "UTAD"}
    assert any("no volume" in line.lower() for line in a.phase.evidence)
    assert a.to_dict()["volume_rules"] == "skipped: no volume data"
    bars, _ = accumulation()
    flat = type(bars)(bars.symbol, bars.dates, bars.open, bars.high, bars.low, bars.close, bars.volume * 0)
    b = analyze(flat)
    assert "SC" not in {e.kind for e in b.events} and "Spring" in {e.kind for e in b.events}
    assert all("×" not in e.detail for e in b.events)


# ---- screen and analyze_stock agree -----------------------------------------------------------------
def test_screen_triggers_are_the_engines_for_the_same_day():
    r = screen(MD, ScreenConfig(top=30))
    assert r.picks
    for p in r.picks:
        inst = MD.resolve(p["symbol"])
        a = analyze(MD.bars(inst), inst)
        assert str(a.as_of) == r.as_of
        assert p["triggers"] == triggers_of(a, 3), p["symbol"]


# ---- event rules ------------------------------------------------------------------------------------
def test_a_spring_whose_low_is_later_closed_under_is_failed(all_analyses):
    for bars, a in all_analyses:
        for e in a.events:
            if e.kind == "Spring" and (bars.close[e.index + 1 :] < e.price).any():
                assert e.status == "failed" and e.bias == "bearish", (a.symbol, e)


def test_a_confirmed_spring_broken_later_turns_failed():
    bars, idx = accumulation(upto="spring")
    b = Builder()
    b.rows = [tuple(r) for r in np.column_stack([bars.open, bars.high, bars.low, bars.close, bars.volume])]
    b.c = float(bars.close[-1])
    b.trend(14, 100.0, 0.8e6)  # past the test window
    b.bar(96.0, 96.2, 89.0, 89.5, 1.0e6)  # then a close under the spring low
    a = analyze(b.build())
    spring = next(e for e in a.events if e.index == idx["Spring"])
    assert spring.status == "failed" and "test on" in spring.detail and "closed under" in spring.detail


def test_secondary_tests_stay_within_the_climax_bounds(all_analyses):
    for _, a in all_analyses:
        climax = {e.kind: e for e in a.events if e.kind in ("SC", "BC")}
        for e in a.events:
            if e.kind != "ST":
                continue
            if e.bias == "bearish":
                assert e.price <= climax["BC"].price * 1.01, (a.symbol, e)
            else:
                assert e.price >= climax["SC"].price * 0.99, (a.symbol, e)


def test_a_gap_down_bar_is_not_an_upthrust(all_analyses):
    for bars, a in all_analyses:
        for e in a.events:
            if e.kind in ("UT", "UTAD"):
                assert bars.high[e.index] > bars.close[e.index - 1], (a.symbol, e)
