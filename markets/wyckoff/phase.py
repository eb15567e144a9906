"""Phase of the structure (A–E of accumulation or distribution, or a mark-up / mark-down trend) with
the evidence list the model can quote.

Bias: accumulation points = SC found, a prior decline into the range, a spring that did not fail, an
SOS, an LPS, absorption EvR; distribution points = BC, a prior advance, UT/UTAD, SOW, LPSY, supply
EvR. The side with more points wins (ties: the prior trend decides; a range after a decline is
accumulation, after an advance it is re-accumulation unless distribution events appear).

Accumulation phases (distribution mirrors them with UTAD for the spring and SOW/LPSY for SOS/LPS):
- E (mark-up): an SOS broke out and price is ≥ `breakout_extend` over resistance, or more than 20
  bars have passed since the SOS with price still above resistance.
- D: an SOS with price still near the top of the range (back-up / LPS zone), or a spring that held
  followed by an LPS or a close above the range's mid.
- C: a spring (not failed) within the range, no SOS yet.
- B: secondary tests seen, or the range is ≥ 30 bars old: building cause.
- A: a climax (SC/AR) starts the range and nothing else yet.
A failed structure (price under support after an SOW for accumulation, over resistance after an SOS
for distribution) flips to the other side. Without a valid range the trend decides: close > MA50 >
MA200 with a rising MA50 is mark-up, the mirror is mark-down, anything else is undetermined.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from markets.wyckoff.params import WyckoffParams
from markets.wyckoff.range import TradingRange
from markets.wyckoff.range_events import Event

Schematic = Literal["accumulation", "distribution", "markup", "markdown", "undetermined"]


@dataclass(frozen=True, slots=True)
class Phase:
    schematic: Schematic
    phase: str | None  # "A".."E" inside a schematic; None for trends
    label: str
    confidence: float
    evidence: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schematic": self.schematic,
            "phase": self.phase,
            "label": self.label,
            "confidence": round(self.confidence, 2),
            "evidence": list(self.evidence),
        }


def _last(events: list[Event], *kinds: str, ok: bool = True) -> Event | None:
    hits = [e for e in events if e.kind in kinds and (not ok or e.status != "failed")]
    return hits[-1] if hits else None


def classify(
    rng: TradingRange | None,
    events: list[Event],
    close: np.ndarray,
    ma_mid: np.ndarray,
    ma_slow: np.ndarray,
    p: WyckoffParams,
    evidence: list[str],
) -> Phase:
    n = len(close)
    c = float(close[-1])
    trend = _trend(close, ma_mid, ma_slow, p)
    if rng is None:
        evidence.append("No valid trading range in the last 240 bars; the phase follows the trend.")
        if trend == "up":
            return Phase("markup", None, "Mark-up (trend)", 0.55, evidence)
        if trend == "down":
            return Phase("markdown", None, "Mark-down (trend)", 0.55, evidence)
        return Phase("undetermined", None, "Undetermined (no range, no clear trend)", 0.3, evidence)

    pre_start = max(0, rng.start - 60)
    prior = close[rng.start] / close[pre_start] - 1 if rng.start > pre_start else 0.0
    evidence.append(
        f"Prior trend: {prior * 100:+.0f}% over the {rng.start - pre_start} bars before the range began."
    )
    acc = sum(
        [
            _last(events, "SC") is not None,
            prior <= -p.trend_min_move,
            _last(events, "Spring") is not None,
            _last(events, "SOS") is not None,
            _last(events, "LPS") is not None,
            any(e.kind == "EvR" and e.variant == "absorption" for e in events),
        ]
    )
    dist = sum(
        [
            _last(events, "BC") is not None,
            prior >= p.trend_min_move,
            _last(events, "UT", "UTAD") is not None,
            _last(events, "SOW") is not None,
            _last(events, "LPSY") is not None,
            any(e.kind == "EvR" and e.variant == "supply" for e in events),
        ]
    )
    side: Schematic = "accumulation" if (acc > dist or (acc == dist and prior <= 0)) else "distribution"
    evidence.append(f"Accumulation points {acc}, distribution points {dist} → reading as {side}.")
    conf = min(0.9, 0.35 + 0.1 * abs(acc - dist) + 0.2 * rng.quality)
    sos, sow = _last(events, "SOS"), _last(events, "SOW")

    if side == "accumulation":
        if sow and (not sos or sow.index > sos.index) and c < rng.support:
            evidence.append(
                f"Price {c:,.2f} is under support after an SOW on {sow.date}: the accumulation failed."
            )
            return Phase("markdown", None, "Mark-down (range broken down)", conf, evidence)
        if sos and c >= rng.resistance * (1 - p.lps_tol):
            if c >= rng.resistance * (1 + p.breakout_extend) or (
                n - 1 - sos.index > 20 and c > rng.resistance
            ):
                return Phase("markup", "E", "Accumulation Phase E (mark-up)", conf, evidence)
            return Phase(
                "accumulation", "D", "Accumulation Phase D (SOS, back-up / LPS zone)", conf, evidence
            )
        spring = _last(events, "Spring")
        if spring and c >= rng.support:
            lps = [e for e in events if e.kind == "LPS" and e.index > spring.index]
            if lps or (c > rng.mid and spring.status == "confirmed"):
                return Phase(
                    "accumulation", "D", "Accumulation Phase D (spring held, higher lows)", conf, evidence
                )
            return Phase("accumulation", "C", "Accumulation Phase C (spring / test)", conf, evidence)
        if _last(events, "ST") or rng.age >= 30:
            return Phase("accumulation", "B", "Accumulation Phase B (building cause)", conf, evidence)
        return Phase("accumulation", "A", "Accumulation Phase A (stopping the decline)", conf, evidence)

    if sos and (not sow or sos.index > sow.index) and c > rng.resistance:
        evidence.append(
            f"Price {c:,.2f} is over resistance after an SOS on {sos.date}: re-accumulation, not distribution."
        )
        return Phase("markup", None, "Mark-up (range broken up)", conf, evidence)
    if sow and c <= rng.support * (1 + p.lps_tol):
        if c <= rng.support * (1 - p.breakout_extend) or (n - 1 - sow.index > 20 and c < rng.support):
            return Phase("markdown", "E", "Distribution Phase E (mark-down)", conf, evidence)
        return Phase("distribution", "D", "Distribution Phase D (SOW, LPSY zone)", conf, evidence)
    ut = _last(events, "UTAD", "UT")
    if ut and c <= rng.resistance:
        return Phase("distribution", "C", f"Distribution Phase C ({ut.kind})", conf, evidence)
    if _last(events, "ST") or rng.age >= 30:
        return Phase("distribution", "B", "Distribution Phase B (building cause)", conf, evidence)
    return Phase("distribution", "A", "Distribution Phase A (stopping the advance)", conf, evidence)


def _trend(close: np.ndarray, ma_mid: np.ndarray, ma_slow: np.ndarray, p: WyckoffParams) -> str:
    c, m, s = close[-1], ma_mid[-1], ma_slow[-1]
    if np.isnan(m):
        return "flat"
    k = p.ma_slope_bars
    rising = len(ma_mid) > k and not np.isnan(ma_mid[-1 - k]) and ma_mid[-1] > ma_mid[-1 - k]
    slow_ok = np.isnan(s) or m > s
    slow_bad = np.isnan(s) or m < s
    if c > m and slow_ok and rising:
        return "up"
    if c < m and slow_bad and not rising:
        return "down"
    return "flat"
