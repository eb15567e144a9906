"""ST status by date: ±5 % limits only while a stock was ST when the data has the history, and the
result saying so when it has only today's list."""

from __future__ import annotations

import numpy as np
import pytest

from markets.backtest import BacktestConfig, run
from markets.bars import Bars
from markets.data import MarketData
from markets.panel import Panel
from markets.rules import MarketRules
from markets.st import ST_FILE, StHistory, st_limits

MD = MarketData()
CFG = BacktestConfig(
    initial_cash=100_000, stop_pct=None, trail_after=None, max_hold=None, enter_same_bar=True
)


def gap_up_panel(first_day: str) -> Panel:
    # 002602 (ST today, main board): closes at 10.00, then opens +6 % at 10.60 — above the ST
    # limit-up (10.50) but inside the ±10 % one (11.00)
    rows = [(10.0, 10.1, 9.9, 10.0), (10.6, 10.7, 10.4, 10.5)]
    a = np.array(rows)
    dates = np.array([np.datetime64(first_day), np.datetime64(first_day) + 1], dtype="datetime64[D]")
    return Panel.from_bars({"002602": Bars("002602", dates, *a.T, np.full(2, 1e6))})


def buy_day1(panel: Panel, limits: np.ndarray) -> list[str]:
    entries = np.zeros(panel.shape, dtype=bool)
    entries[0, 1] = True
    r = run(panel, rules=MarketRules.cn(), cfg=CFG, entries=entries, limits=limits)
    return [b["reason"] for b in r.blocked] or [f["date"] for f in r.fills]


def test_st_limits_follow_the_history_by_date(tmp_path):
    (tmp_path / ST_FILE).write_text("code,start,end\n002602,2024-05-01,\n600000,2020-01-01,2020-06-30\n")
    md = MarketData(calendar_dir=tmp_path)
    before, during = gap_up_panel("2024-03-04"), gap_up_panel("2024-06-03")
    st_before = st_limits(md, ["002602"], before.dates)
    st_during = st_limits(md, ["002602"], during.dates)
    assert st_before.by_date and st_before.limits.tolist() == [[0.10, 0.10]]
    assert st_during.limits.tolist() == [[0.05, 0.05]]
    assert "by date" in st_during.note
    # not ST yet: the +6 % open fills; while ST it is at the limit-up and waits
    assert buy_day1(before, st_before.limits) == ["2024-03-05"]
    assert buy_day1(during, st_during.limits) == ["price at limit-up"]
    # a spell that ended: 600000 was ST only in the first half of 2020
    d = np.array(["2020-03-02", "2020-07-01"], dtype="datetime64[D]")
    assert st_limits(md, ["600000"], d).limits.tolist() == [[0.05, 0.10]]


def test_without_history_todays_st_applies_and_the_result_says_so():
    panel = gap_up_panel("2024-03-04")
    st = st_limits(MD, ["002602", "600000"], panel.dates)
    assert not st.by_date and st.limits[0].tolist() == [0.05, 0.05] and st.limits[1].tolist() == [0.10, 0.10]
    assert "ST华通(002602)" in st.note and "whole period" in st.note
    assert buy_day1(panel, st.limits[:1]) == ["price at limit-up"]


def test_a_bad_st_file_is_a_clear_error(tmp_path):
    p = tmp_path / ST_FILE
    p.write_text("code,start,end\n002602,May 2024,\n")
    with pytest.raises(ValueError, match=r"cn_st_history.csv:2: expected code,start,end"):
        StHistory.load(p)
