"""`screen(require_trigger=True)` keeps exactly the candidates whose engine read (the one
`analyze_stock` gives) carries a trigger, ranked as without the filter."""

from __future__ import annotations

from markets.data import MarketData
from markets.screen import ScreenConfig, screen, triggers_of
from markets.wyckoff import analyze

MD = MarketData()
PANEL = MD.panel(min_bars=1)
TRIGGERS = {"spring", "sos", "lps"}


def test_require_trigger_filters_on_the_engines_triggers_after_ranking():
    # top/confirm_top ≥ the universe: the unfiltered screen ranks every candidate by the engine
    everything = screen(MD, ScreenConfig(top=300, confirm_top=300), panel=PANEL)
    want = [p["symbol"] for p in everything.picks if set(p["triggers"]) & TRIGGERS]
    strict = screen(MD, ScreenConfig(require_trigger=True, top=300), panel=PANEL)
    assert [p["symbol"] for p in strict.picks] == want
    assert strict.funnel["triggers"] == len(want) == 24
    # each pick's triggers are its analyze_stock events on the last 3 bars
    for p in strict.picks:
        a = analyze(PANEL.bars_of(p["symbol"]), MD.resolve(p["symbol"]))
        assert set(triggers_of(a, 3)) & TRIGGERS == set(p["triggers"]) & TRIGGERS
    # the default top 20 keeps the unfiltered rank-1 pick (an SOS) at rank 1
    default = screen(MD, ScreenConfig(require_trigger=True), panel=PANEL)
    top = screen(MD, ScreenConfig(), panel=PANEL).picks[0]
    assert "sos" in top["triggers"] and default.picks[0]["symbol"] == top["symbol"]
    assert len(default.picks) == 20
