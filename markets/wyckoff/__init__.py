"""Wyckoff engine: trading range, events, phase with evidence, health rating.

    from markets.wyckoff import analyze
    a = analyze(bars, inst)            # WyckoffAnalysis
    a.phase.label, a.phase.evidence, a.range.support, [e.kind for e in a.events], a.health.rating

The rules are documented in each module: `range` (trading range), `events` (SC, AR, ST, Spring,
UT/UTAD, SOS/SOW, LPS/LPSY, EvR), `phase` (A–E, mark-up/mark-down), `health` (green/yellow/red),
`signals` (the same rules vectorised over a panel for the screen and the backtester); every
threshold is a named field of `WyckoffParams`.
"""

from markets.wyckoff.engine import WyckoffAnalysis, analyze
from markets.wyckoff.holding_health import Health
from markets.wyckoff.params import DEFAULT_PARAMS, WyckoffParams
from markets.wyckoff.phase import Phase
from markets.wyckoff.range import TradingRange, find_range
from markets.wyckoff.range_events import Event

__all__ = [
    "DEFAULT_PARAMS",
    "Event",
    "Health",
    "Phase",
    "TradingRange",
    "WyckoffAnalysis",
    "WyckoffParams",
    "analyze",
    "find_range",
]
