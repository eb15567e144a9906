"""Bar cache in the database, charts (CJK font), and the screen on the fixture universe."""

from __future__ import annotations

import numpy as np
import pytest
from markets_helpers import DATA, make_sessions

from markets.cache import BarCache
from markets.data import MarketData
from markets.providers import BundledProvider
from markets.providers.network import AkshareProvider
from markets.screen import ScreenConfig, screen


class CountingAk:
    def __init__(self):
        self.calls = 0

    def stock_zh_a_hist(self, **kw):
        self.calls += 1
        return [
            {
                "日期": "2024-01-02",
                "开盘": 10.0,
                "收盘": 10.5,
                "最高": 10.8,
                "最低": 9.9,
                "成交量": 1000,
                "成交额": 1.05e6,
            },
            {
                "日期": "2024-01-03",
                "开盘": 10.5,
                "收盘": 10.2,
                "最高": 10.6,
                "最低": 10.1,
                "成交量": 800,
                "成交额": 8.2e5,
            },
        ]


async def test_network_bars_are_cached_in_the_database(tmp_path):
    engine, sessions = await make_sessions(tmp_path)
    ak = CountingAk()
    md = MarketData([AkshareProvider(module=ak)], cache=BarCache(sessions))
    first = await md.abars("600519")
    second = await md.abars("600519")
    assert ak.calls == 1 and second.source == "akshare (cached)"
    assert second.volume.tolist() == first.volume.tolist() == [100_000, 80_000]
    assert [str(d) for d in second.dates] == ["2024-01-02", "2024-01-03"]
    await engine.dispose()


def test_charts_render_png_with_the_shipped_cjk_font(tmp_path):
    from markets import charts
    from markets.wyckoff import analyze

    font = charts.cjk_font()
    assert font is not None and "NotoSansCJK" in font.get_file()
    md = MarketData()
    inst = md.resolve("600519")
    bars = md.bars(inst)
    p = charts.candles(bars, tmp_path, name=inst.name, analysis=analyze(bars, inst))
    assert p.read_bytes()[:4] == b"\x89PNG" and p.stat().st_size > 20_000
    eq = charts.equity_curve(bars.dates, bars.close * 10, tmp_path, benchmark=bars.close, title="回测")
    assert eq.is_file()


def test_chart_titles_fall_back_to_codes_without_a_cjk_font(tmp_path, monkeypatch):
    from markets import charts

    monkeypatch.setattr(charts, "cjk_font", lambda: None)
    text, font = charts._title("贵州茅台(600519)", "600519")
    assert (text, font) == ("600519", None)


@pytest.fixture(scope="module")
def fixture_md() -> MarketData:
    return MarketData([BundledProvider(cn_file=DATA / "fixtures_small.csv.gz")])


def test_screen_on_the_fixture_universe(fixture_md):
    stages = []
    r = screen(fixture_md, ScreenConfig(top=10), progress=lambda s, d, p: stages.append((s, p)))
    assert r.funnel["universe"] == 30 and r.as_of == "2025-09-03"
    assert r.funnel["liquid"] <= 30 and r.funnel["ranked"] <= r.funnel["liquid"]
    assert 0 < len(r.picks) <= 10 and [p["rank"] for p in r.picks] == list(range(1, len(r.picks) + 1))
    scores = [p["score"] for p in r.picks]
    assert scores == sorted(scores, reverse=True)
    assert all(p["reasons"] and "phase" in p for p in r.picks)
    assert stages[-1] == ("done", 100.0) and all(0 <= p <= 100 for _, p in stages if p is not None)


def test_screen_filters(fixture_md):
    strict = screen(fixture_md, ScreenConfig(require_trigger=True, top=30))
    assert all(set(p["triggers"]) & {"spring", "sos", "lps"} for p in strict.picks)
    nothing = screen(fixture_md, ScreenConfig(min_amount=1e15))
    assert nothing.funnel["liquid"] == 0 and nothing.picks == []


def test_screen_vectorised_triggers_match_a_single_stock_run(fixture_md):
    from markets.wyckoff import signals
    from markets.wyckoff.params import WyckoffParams

    panel = fixture_md.panel()
    s_all = signals.compute(panel.open, panel.high, panel.low, panel.close, panel.volume, WyckoffParams())
    i = panel.row("600519")
    s_one = signals.compute(
        *(x[i : i + 1] for x in (panel.open, panel.high, panel.low, panel.close, panel.volume)),
        WyckoffParams(),
    )
    assert np.array_equal(s_all.spring[i], s_one.spring[0]) and np.array_equal(s_all.sos[i], s_one.sos[0])
