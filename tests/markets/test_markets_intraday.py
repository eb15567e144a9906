"""Minute bars and the intraday / tail-session tools, plus `market_regime` and
`wyckoff_diagnose` from the MCP tier table.

The akshare provider is tested at the library's function boundary: `FakeAk.stock_zh_a_hist_min_em`
answers with a DataFrame-like object holding rows in akshare's exact shape, read from
`data/akshare_min_600519.json` (see `data/make_akshare_minute.py`; akshare is an optional extra and
is not installed here, and tests never touch the network)."""

from __future__ import annotations

import json
import sys
from datetime import date

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markets_helpers import DATA

from agent.tools.registry import Deps, ToolContext
from markets.data import MarketData
from markets.errors import NoData, ProviderUnavailable
from markets.intraday import IntradayParams, read_day, rescue_check, tail_check
from markets.minute import MinuteBars, NoMinuteData
from markets.providers.akshare_minute import AkshareMinuteProvider, parse_akshare_minute
from markets.services import MarketServices
from markets.tools import market_tools

FIX = json.loads((DATA / "akshare_min_600519.json").read_text("utf-8"))
DAILY = MarketData()


class FakeFrame:
    """The two DataFrame methods the provider uses."""

    def __init__(self, rows: list[dict]):
        self.rows = rows

    def reset_index(self) -> FakeFrame:
        return self

    def to_dict(self, orient: str) -> list[dict]:
        assert orient == "records"
        return [dict(r) for r in self.rows]


class FakeAk:
    def __init__(self, rows: list[dict] = FIX):
        self.rows = rows
        self.calls: list[dict] = []

    def stock_zh_a_hist_min_em(self, **kw):
        self.calls.append(kw)
        return FakeFrame([r for r in self.rows if kw["start_date"] <= r["时间"] <= kw["end_date"]])


def live_md(ak: FakeAk | None = None) -> MarketData:
    return MarketData(minute_providers=[AkshareMinuteProvider(module=ak or FakeAk())])


def ctx_for(md: MarketData) -> ToolContext:
    return ToolContext(call_id="c1", session_id="s1", user_id="u1", deps=Deps(MarketServices(data=md)))


async def call(md: MarketData, tool: str, **args):
    return await market_tools.get(tool).call(ctx_for(md), args)


# ---- the port and the akshare provider ---------------------------------------------------------
def test_parse_akshare_minute_units_and_vwap():
    m = parse_akshare_minute(FIX, "600519")
    assert len(m) == 482 and m.days() == [date(2025, 9, 2), date(2025, 9, 3)]
    assert m.volume[0] == FIX[0]["成交量"] * 100  # lots → shares
    d = m.on(date(2025, 9, 3))
    assert len(d) == 241 and str(d.times[0]) == "2025-09-03T09:30" and str(d.times[-1]) == "2025-09-03T15:00"
    akshare_avg = np.array([r["均价"] for r in FIX if r["时间"].startswith("2025-09-03")])
    assert np.allclose(d.vwap(), akshare_avg, atol=0.01)  # our VWAP = akshare's running average price
    assert float(d.high.max()) == 1503.5 and float(d.low.min()) == 1466.0 and float(d.close[-1]) == 1480.55
    with pytest.raises(NoMinuteData):
        parse_akshare_minute([], "600519")


def test_akshare_minute_request_for_a_day_and_for_the_latest_session():
    ak = FakeAk()
    p = AkshareMinuteProvider(module=ak)
    inst = DAILY.resolve("600519")
    m = p.minute_bars(inst, date(2025, 9, 2))
    assert ak.calls == [
        {
            "symbol": "600519",
            "start_date": "2025-09-02 09:00:00",
            "end_date": "2025-09-02 15:30:00",
            "period": "1",
            "adjust": "",
        }
    ]
    assert m.day == date(2025, 9, 2) and len(m) == 241
    assert p.minute_bars(inst).day == date(2025, 9, 3)  # no day: the latest session returned
    with pytest.raises(NoMinuteData):
        p.minute_bars(inst, date(2025, 9, 4))
    assert not p.has_minutes(DAILY.resolve("BTC")) and not p.has_minutes(DAILY.resolve("沪深300"))


def test_missing_akshare_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "akshare", None)  # import fails as if not installed
    with pytest.raises(ProviderUnavailable, match="akshare"):
        AkshareMinuteProvider().minute_bars(DAILY.resolve("600519"))


def test_the_akshare_provider_setting_brings_minute_bars():
    from markets.services import MarketSettings, build_market_data

    md = build_market_data(MarketSettings(providers=["akshare", "bundled"]))
    assert [p.name for p in md.minute_providers] == ["akshare"]
    assert build_market_data(MarketSettings()).minute_providers == []


def test_market_data_minute_bars_without_a_provider_says_it_needs_one():
    with pytest.raises(NoMinuteData, match="live provider") as exc:
        DAILY.minute_bars("600519")
    assert isinstance(exc.value, NoData)


# ---- intraday rules on hand-made sessions -------------------------------------------------------
def session(closes: list[float], vols: list[float] | None = None, day: str = "2025-09-03") -> MinuteBars:
    """Minute bars from 09:30 on, one per close (lunch break skipped), open = previous close."""
    times = []
    t = np.datetime64(f"{day}T09:30")
    for _ in closes:
        times.append(t)
        t = t + 1
        if t == np.datetime64(f"{day}T11:31"):
            t = np.datetime64(f"{day}T13:01")
    c = np.asarray(closes, dtype=float)
    o = np.concatenate([[c[0]], c[:-1]])
    v = np.asarray(vols if vols is not None else [1000.0] * len(c), dtype=float)
    return MinuteBars.from_arrays("TEST", np.array(times), o, np.maximum(o, c), np.minimum(o, c), c, v)


FULL = 241  # 09:30 … 11:30, 13:01 … 15:00


def test_tail_check_ok_when_every_playbook_check_passes():
    m = session(list(np.linspace(100, 103, FULL)))
    t = tail_check(m, support=98.0)
    assert t.verdict == "ok", t
    assert {c.name: c.ok for c in t.checks} == {
        "tail_session": True,
        "support_held": True,
        "above_vwap": True,
        "close_position": True,
        "no_spike_and_fade": True,
    }


def test_tail_check_refuses_a_broken_support_and_a_spike_and_fade():
    broken = tail_check(session(list(np.linspace(100, 97, FULL))), support=98.0)
    assert broken.verdict == "no_buy" and "support" in broken.reason
    closes = (
        list(np.linspace(100, 101, 200)) + list(np.linspace(101, 106, 10)) + list(np.linspace(106, 101.5, 31))
    )
    vols = [1000.0] * 200 + [12_000.0] * 10 + [1500.0] * 31
    fade = tail_check(session(closes, vols), support=95.0)
    assert fade.verdict == "no_buy" and "spike" in fade.reason


def test_tail_check_waits_before_the_tail_session_and_under_vwap():
    early = tail_check(session(list(np.linspace(100, 103, 150))), support=98.0)  # data ends 13:..
    assert early.verdict == "wait" and "14:45" in early.reason
    dip = list(np.linspace(100, 104, 120)) + list(np.linspace(104, 100.5, FULL - 120))
    under = tail_check(session(dip), support=98.0)
    assert under.verdict == "wait" and not dict((c.name, c.ok) for c in under.checks)["above_vwap"]


def test_rescue_check_states():
    dip_and_reclaim = list(np.linspace(100, 96, 60)) + list(np.linspace(96, 101, FULL - 60))
    r = rescue_check(session(dip_and_reclaim), level=98.0)
    assert r.status == "rescued" and r.low < 98.0 <= r.last
    assert rescue_check(session(list(np.linspace(100, 96, FULL))), level=98.0).status == "not_rescued"
    assert rescue_check(session(list(np.linspace(100, 102, FULL))), level=98.0).status == "no_break"
    partial = [104.0] * 150 + list(np.linspace(104, 96, 30)) + list(np.linspace(96, 98.5, FULL - 180))
    assert rescue_check(session(partial), level=98.0).status == "reclaimed_under_vwap"


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.floats(90, 110, allow_nan=False), min_size=5, max_size=FULL),
    st.floats(90, 110, allow_nan=False),
)
def test_tail_and_rescue_decisions_never_contradict_their_rules(closes, level):
    m = session(closes)
    t = tail_check(m, support=level)
    last = float(m.close[-1])
    if t.verdict == "ok":
        assert last >= level and last >= float(m.vwap()[-1]) - 1e-9
        assert m.times[-1] >= np.datetime64("2025-09-03T14:45")
    if last < level:
        assert t.verdict == "no_buy"
    r = rescue_check(m, level=level)
    assert (r.status == "no_break") == (float(m.low.min()) >= level)
    if r.status == "rescued":
        assert last >= level and last >= float(m.vwap()[-1]) - 1e-9
    if r.status == "not_rescued":
        assert last < level


def test_read_day_summary():
    m = parse_akshare_minute(FIX, "600519").on(date(2025, 9, 3))
    r = read_day(m, prev_close=1491.3, support=1470.0, resistance=1510.0, params=IntradayParams())
    d = r.to_dict()
    assert d["last"] == 1480.55 and d["change_pct"] == round((1480.55 / 1491.3 - 1) * 100, 2)
    day = [r for r in FIX if r["时间"].startswith("2025-09-03")]
    first_at = lambda key, v: next(r["时间"][11:16] for r in day if r[key] == v)  # noqa: E731
    assert d["high_time"] == first_at("最高", 1503.5) and d["low_time"] == first_at("最低", 1466.0)
    assert 0 <= d["minutes_above_vwap_pct"] <= 100 and d["observations"]
    assert d["vwap"] == pytest.approx(FIX[-1]["均价"], abs=0.01)


# ---- the tools -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("intraday_analysis", {"code": "600519"}),
        ("intraday_rescue_check", {"code": "600519"}),
        ("query_tail_buy", {"codes": ["600519", "000001"]}),
    ],
)
async def test_on_the_bundled_data_the_tools_say_minute_data_needs_a_live_provider(tool, args):
    out = await call(DAILY, tool, **args)
    rows = out["results"] if "results" in out else [out]
    for row in rows:
        assert row["available"] is False and "live provider" in row["message"]
        assert row["daily_as_of"] == "2025-09-03"


async def test_intraday_analysis_on_recorded_minutes():
    out = await call(live_md(), "intraday_analysis", code="600519")
    assert out["available"] and out["as_of"] == "2025-09-03 15:00" and out["source"].startswith("akshare")
    assert out["prev_close"] == 1491.3  # from the daily bars before the session
    assert out["vwap"] == pytest.approx(FIX[-1]["均价"], abs=0.01)
    assert out["refs"] == {"stock": "600519"} and "support" in out["daily"]


async def test_tail_buy_and_rescue_on_recorded_minutes():
    out = await call(live_md(), "query_tail_buy", codes=["600519"], day="2025-09-02")
    (row,) = out["results"]
    assert (
        row["available"] and row["as_of"] == "2025-09-02 15:00" and row["verdict"] in ("ok", "wait", "no_buy")
    )
    assert {c["name"] for c in row["checks"]} >= {"support_held", "above_vwap", "no_spike_and_fade"}
    assert "playbook" in out
    r = await call(live_md(), "intraday_rescue_check", code="600519", level=1470.0)
    # the session of 2025-09-03 broke 1470 (low 1466) and closed back above it (1480.55)
    expected = "rescued" if 1480.55 >= FIX[-1]["均价"] else "reclaimed_under_vwap"
    assert r["available"] and r["status"] == expected and r["level"] == 1470.0 and r["low"] == 1466.0
    cost = await call(live_md(), "intraday_rescue_check", code="600519", cost=1600.0)
    assert cost["level"] == round(1600 * 0.93, 4) and cost["status"] == "not_rescued"
    assert "cost" in cost["level_from"]


async def test_a_bad_code_in_a_tail_list_does_not_sink_the_others():
    out = await call(live_md(), "query_tail_buy", codes=["600519", "600519.SZ"])
    ok, bad = out["results"]
    assert ok["available"] and "600519.SH" in bad["error"]


async def test_market_regime_on_the_bundled_data():
    out = await call(DAILY, "market_regime")
    assert out["as_of"] == "2025-09-03" and out["regime"] in ("risk_on", "neutral", "risk_off")
    idx = DAILY.index_bars("000300")
    assert out["index"]["close"] == round(float(idx.close[-1]), 2)
    assert out["reasons"] and 0 <= out["breadth"]["pct_above_ma50"] <= 100
    assert out["index"]["wyckoff"]["volume_rules"] == "skipped: no volume data"


async def test_wyckoff_diagnose_reads_each_code_with_its_cost():
    out = await call(
        DAILY, "wyckoff_diagnose", codes=["600519", "比特币", "600519.SZ"], costs={"600519": 1400.0}
    )
    a, b, c = out["results"]
    assert a["symbol"] == "600519" and a["health"]["rating"] in ("green", "yellow", "red")
    assert a["health"]["stops"]["hard_stop"] == pytest.approx(1400 * 0.93)
    assert b["symbol"] == "BTC/USDT" and b["as_of"] == "2025-07-13"
    assert "600519.SH" in c["error"]


def test_the_mcp_tier_table_names_tools_that_exist():
    from bot.mcp_server import TIER_BY_TOOL

    for name in (
        "market_regime",
        "wyckoff_diagnose",
        "intraday_analysis",
        "intraday_rescue_check",
        "query_tail_buy",
    ):
        assert name in market_tools and TIER_BY_TOOL[name] == 2
