"""The market regime: risk-on / neutral / risk-off from the CSI 300's trend and the universe's
breadth, with the reasons, as of the stocks' last bar.

Score (each rule adds or subtracts one point):

| rule | +1 | −1 |
|---|---|---|
| index close vs MA200 | above | below |
| MA50 vs MA200 | above | below |
| MA50 slope over 10 bars | rising | falling |
| breadth: share of the universe above its MA50 | ≥ 60 % | ≤ 40 % |
| drawdown from the 250-bar high | | worse than −15 % |
| 20-bar realised volatility (annualised) | | over 30 % |

score ≥ 2 → `risk_on`, score ≤ −2 → `risk_off`, else `neutral`. The index's own Wyckoff read is
attached (price-only: the bundled index has no volume). Observations from rules, not advice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from markets.data import MarketData
from markets.indicators import sma
from markets.wyckoff import analyze

RegimeLabel = Literal["risk_on", "neutral", "risk_off"]


@dataclass(frozen=True, slots=True)
class Regime:
    as_of: str
    regime: RegimeLabel
    score: int
    reasons: list[str]
    index: dict[str, Any]
    breadth: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "as_of": self.as_of,
            "regime": self.regime,
            "score": self.score,
            "reasons": self.reasons,
            "index": self.index,
            "breadth": self.breadth,
            "note": "observations from rules, not investment advice",
        }


def _breadth(data: MarketData) -> dict[str, Any]:
    panel = data.panel(min_bars=60)
    if not panel.symbols:
        return {}
    C = panel.close
    last, prev = C[:, -1], C[:, -2]
    with np.errstate(invalid="ignore"):
        ok = ~np.isnan(last)
        above50 = (last > sma(C, 50)[:, -1])[ok]
        above200 = (last > sma(C, 200)[:, -1])[ok]
        chg = (last / prev - 1)[ok]
    return {
        "universe": int(ok.sum()),
        "pct_above_ma50": round(100 * float(above50.mean()), 1),
        "pct_above_ma200": round(100 * float(above200.mean()), 1),
        "advancers": int((chg > 0).sum()),
        "decliners": int((chg < 0).sum()),
    }


def market_regime(data: MarketData, index: str = "000300") -> Regime:
    inst = data.directory.index(index)
    bars = data.index_bars(index)
    c = bars.close
    ma50, ma200 = sma(c, 50), sma(c, 200)
    close, m50, m200 = float(c[-1]), float(ma50[-1]), float(ma200[-1])
    slope = float(ma50[-1] / ma50[-11] - 1) if len(c) > 60 else 0.0
    hi250 = float(np.max(bars.high[-250:]))
    dd = close / hi250 - 1
    rets = np.diff(np.log(c[-21:]))
    vol = float(np.std(rets, ddof=1) * np.sqrt(244)) if len(rets) > 2 else 0.0
    breadth = _breadth(data)
    score, reasons = 0, []

    def rule(cond_up: bool, cond_down: bool, up: str, down: str) -> None:
        nonlocal score
        if cond_up:
            score += 1
            reasons.append(f"+1 {up}")
        elif cond_down:
            score -= 1
            reasons.append(f"−1 {down}")

    rule(
        close > m200,
        close < m200,
        f"close {close:,.2f} above MA200 {m200:,.2f}",
        f"close {close:,.2f} under MA200 {m200:,.2f}",
    )
    rule(m50 > m200, m50 < m200, "MA50 above MA200", "MA50 under MA200")
    rule(
        slope > 0,
        slope < 0,
        f"MA50 rising ({slope * 100:+.1f}% over 10 bars)",
        f"MA50 falling ({slope * 100:+.1f}% over 10 bars)",
    )
    b50 = breadth.get("pct_above_ma50")
    if b50 is not None:
        rule(
            b50 >= 60,
            b50 <= 40,
            f"breadth: {b50:.0f}% of stocks above their MA50",
            f"breadth: only {b50:.0f}% of stocks above their MA50",
        )
    rule(False, dd < -0.15, "", f"drawdown {dd * 100:.1f}% from the 250-bar high")
    rule(False, vol > 0.30, "", f"20-bar volatility {vol * 100:.0f}% annualised")
    label: RegimeLabel = "risk_on" if score >= 2 else "risk_off" if score <= -2 else "neutral"
    a = analyze(bars, inst)
    return Regime(
        as_of=str(bars.last_date),
        regime=label,
        score=score,
        reasons=reasons,
        index={
            "symbol": index,
            "name": inst.name if inst else index,
            "close": round(close, 2),
            "ma50": round(m50, 2),
            "ma200": round(m200, 2),
            "ma50_slope_10d_pct": round(slope * 100, 2),
            "drawdown_250d_pct": round(dd * 100, 2),
            "vol_20d_ann_pct": round(vol * 100, 1),
            "ret_20d_pct": round((close / float(c[-21]) - 1) * 100, 2),
            "ret_60d_pct": round((close / float(c[-61]) - 1) * 100, 2),
            "wyckoff": {
                "phase": a.phase.label,
                "range": a.range.to_dict() if a.range else None,
                "volume_rules": a.to_dict()["volume_rules"],
            },
        },
        breadth=breadth,
    )
