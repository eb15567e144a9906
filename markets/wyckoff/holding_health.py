"""Health rating for a holding: green / yellow / red with the reasons.

Dangers (any → red): close under the hard stop (cost × (1 − stop_pct)); close under the trailing stop
(once the gain passed `trail_after`); close under the range's support after an SOW (structural stop);
bearish MA alignment (close < MA20 < MA50 < MA200); a 10-bar crash worse than `crash_10d`; the
structure reads as distribution Phase C/D or mark-down.
Warnings: close under MA20; close under MA50; MA50 falling; MA50 under MA200; within `stop_warn` of
a stop; price in the top fifth of a range read as distribution; a recent UT/UTAD.
Positives: bullish MA alignment (close > MA20 > MA50 > MA200); accumulation Phase C/D/E or mark-up;
a recent spring (not failed), SOS or LPS; the position is in profit.
Rating: red on any danger; yellow on ≥ 2 warnings, or 1 warning and no positive; green otherwise.
Without a cost, only market-structure reasons are used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from markets.wyckoff.params import WyckoffParams
from markets.wyckoff.phase import Phase
from markets.wyckoff.range import TradingRange
from markets.wyckoff.range_events import Event

Rating = Literal["green", "yellow", "red"]


@dataclass(frozen=True, slots=True)
class Health:
    rating: Rating
    dangers: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    positives: list[str] = field(default_factory=list)
    stops: dict[str, float] = field(default_factory=dict)
    range_position: float | None = None

    @property
    def reasons(self) -> list[str]:
        return [*self.dangers, *self.warnings, *self.positives]

    def to_dict(self) -> dict[str, Any]:
        return {
            "rating": self.rating,
            "dangers": self.dangers,
            "warnings": self.warnings,
            "positives": self.positives,
            "stops": {k: round(v, 4) for k, v in self.stops.items()},
            "range_position": None if self.range_position is None else round(self.range_position, 2),
        }


def rate(
    close: np.ndarray,
    mas: dict[str, np.ndarray],
    rng: TradingRange | None,
    phase: Phase,
    events: list[Event],
    p: WyckoffParams,
    cost: float | None = None,
    high_since_entry: float | None = None,
) -> Health:
    c = float(close[-1])
    dangers: list[str] = []
    warns: list[str] = []
    pos: list[str] = []
    stops: dict[str, float] = {}
    m20, m50, m200 = (float(mas[k][-1]) for k in ("ma20", "ma50", "ma200"))
    have200 = not np.isnan(m200)

    if cost:
        hard = cost * (1 - p.stop_pct)
        stops["hard_stop"] = hard
        gain = c / cost - 1
        if c < hard:
            dangers.append(
                f"Close {c:,.2f} is under the hard stop {hard:,.2f} (cost {cost:,.2f} − {p.stop_pct:.0%})."
            )
        elif c < hard * (1 + p.stop_warn):
            warns.append(f"Close {c:,.2f} is within {p.stop_warn:.0%} of the hard stop {hard:,.2f}.")
        top = max(high_since_entry or 0.0, c)
        if top / cost - 1 >= p.trail_after:
            trail = top * (1 - p.trail_pct)
            stops["trailing_stop"] = trail
            if c < trail:
                dangers.append(
                    f"Close {c:,.2f} is under the trailing stop {trail:,.2f} ({p.trail_pct:.0%} off the high {top:,.2f})."
                )
        (pos if gain > 0 else warns).append(
            f"Position {'up' if gain > 0 else 'down'} {gain * 100:+.1f}% from cost {cost:,.2f}."
        )
    if rng is not None:
        stops["structure_stop"] = rng.support * (1 - p.pierce) * (1 - p.spring_max_depth / 2)
        sow = [e for e in events if e.kind == "SOW"]
        if sow and c < rng.support:
            dangers.append(
                f"Close under the range support {rng.support:,.2f} after an SOW on {sow[-1].date}."
            )
    if not np.isnan(m50) and have200 and c < m20 < m50 < m200:
        dangers.append("Bearish MA alignment: close < MA20 < MA50 < MA200.")
    if len(close) > 10:
        r10 = c / close[-11] - 1
        if r10 <= p.crash_10d:
            dangers.append(f"Fell {r10 * 100:.1f}% in 10 bars.")
    if phase.schematic == "markdown" or (phase.schematic == "distribution" and phase.phase in ("C", "D")):
        dangers.append(f"Structure reads as {phase.label}.")

    if not np.isnan(m20) and c < m20:
        warns.append(f"Close under MA20 ({m20:,.2f}).")
    if not np.isnan(m50) and c < m50:
        warns.append(f"Close under MA50 ({m50:,.2f}).")
    k = p.ma_slope_bars
    ma50 = mas["ma50"]
    if len(ma50) > k and not np.isnan(ma50[-1 - k]) and ma50[-1] < ma50[-1 - k]:
        warns.append("MA50 is falling.")
    if have200 and not np.isnan(m50) and m50 < m200:
        warns.append("MA50 is under MA200.")
    rpos = rng.position(c) if rng else None
    if rng and phase.schematic == "distribution" and rpos is not None and rpos >= 0.8:
        warns.append("Price is in the top fifth of a range that reads as distribution.")
    recent = [e for e in events if e.index >= len(close) - 20]
    if any(e.kind in ("UT", "UTAD") and e.status != "failed" for e in recent):
        warns.append("Upthrust in the last 20 bars.")

    if not np.isnan(m50) and have200 and c > m20 > m50 > m200:
        pos.append("Bullish MA alignment: close > MA20 > MA50 > MA200.")
    if phase.schematic == "markup" or (phase.schematic == "accumulation" and phase.phase in ("C", "D", "E")):
        pos.append(f"Structure reads as {phase.label}.")
    for e in recent:
        if e.kind in ("Spring", "SOS", "LPS") and e.status != "failed":
            pos.append(f"{e.kind} on {e.date}.")

    if dangers:
        rating: Rating = "red"
    elif len(warns) >= 2 or (len(warns) == 1 and not pos):
        rating = "yellow"
    else:
        rating = "green"
    return Health(rating, dangers, warns, pos, stops, rpos)
