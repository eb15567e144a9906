"""Wyckoff events as labelled bars in and around the trading range.

Volume multiples compare a bar's volume with the `vol_avg`-bar average *before* it; ATR is the
14-bar average true range before the bar. Limit-locked bars (one-price bars, high == low, at the
daily limit) are never events and never count as low-volume tests: their volume says nothing about
supply or demand.

| event | rule (defaults in WyckoffParams) |
|---|---|
| SC (selling climax) | down bar; volume ≥ 2 × avg; range ≥ 1.5 ATR; lowest low of 40 bars; ≥ 10 % decline over the 40 bars before; the one nearest the range's low wins |
| BC (buying climax) | mirror of SC after an advance |
| AR (automatic rally / reaction) | the extreme within 15 bars after the climax, at least 1.5 ATR away, before the climax extreme is broken |
| ST (secondary test) | after the AR, a bar within 1 ATR of the climax extreme on ≤ 0.8 × the climax volume, and not beyond the climax by more than 1 % (`st_max_beyond`: an ST's high ≤ 1.01 × the BC high; its low ≥ 0.99 × the SC low) |
| Spring | low (this or previous bar) ≥ 0.5 % under support and ≤ 8 % (board-scaled) under it; close back above support and below mid + 0.25 × width. Variants: `low_volume` (≤ 0.8 × avg: no supply, strongest), `shakeout` (≥ 1.3 × avg: needs a test), `normal`. Test: 2–10 bars later, a pull-back bar (lower low than the bar before) near support (low ≤ support × (1 + touch_tol)) holding the spring low (undercut ≤ 1 %) on ≤ 0.7 × the spring's volume and ≤ avg → `confirmed`; a close under the spring low at any time after the spring, also after a confirming test → `failed`; otherwise `awaiting_test` (still inside the window) or `untested` |
| UT / UTAD | mirror of the spring at resistance with an upper shadow ≥ 35 % of the bar, and a high above the previous close (a bar that gapped down and never got back to the previous close is a break, not a thrust); UTAD when in the second half of the range's life on ≥ 1.3 × avg volume |
| SOS (sign of strength, JAC) | close above resistance; previous close ≤ 2 % above it; move ≥ 4 %; volume ≥ 1.5 × avg; not a one-price limit-up bar |
| SOW (sign of weakness) | mirror of SOS under support |
| LPS | after an SOS: a swing-low pullback (≥ 2 % off the post-SOS high) holding within 3 % of the broken resistance on ≤ 0.7 × the SOS volume and ≤ avg. After a spring (no SOS yet): a higher swing low ≤ support + 0.35 × width, close above support, volume ≤ 0.7 × avg |
| LPSY | mirror of LPS after an SOW (a weak rally failing under the broken support) |
| EvR (effort vs result) | volume ≥ 1.8 × avg with a close-to-close move within ±2 % (board-scaled) inside the range; near support it reads as absorption (bullish), near resistance as supply (bearish) |

Without volume (an index whose data has none, or all-zero volume) the volume rules are skipped,
not guessed: no SC/BC (and so no AR/ST), no UTAD, no EvR; springs get the variant `price_only` and
are never `confirmed` (the test is a volume test) but still `failed` by a close under their low;
SOS/SOW/LPS/LPSY are judged on price alone and say so in their detail.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any, Literal

import numpy as np

from markets.wyckoff.params import WyckoffParams
from markets.wyckoff.range import TradingRange

EventKind = Literal["SC", "BC", "AR", "ST", "Spring", "UT", "UTAD", "SOS", "SOW", "LPS", "LPSY", "EvR"]


@dataclass(frozen=True, slots=True)
class Event:
    kind: EventKind
    index: int
    date: date
    price: float  # the level that matters: the low of an SC/spring, the close of an SOS, ...
    volume_ratio: float  # volume / average volume before the bar
    detail: str
    variant: str = ""  # spring: low_volume | shakeout | normal; LPS: after_sos | after_spring
    status: str = ""  # spring/UT test: confirmed | awaiting_test | untested | failed
    bias: Literal["bullish", "bearish", "neutral"] = "neutral"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "date": str(self.date),
            "price": round(self.price, 4),
            "volume_ratio": None if np.isnan(self.volume_ratio) else round(self.volume_ratio, 2),
            "detail": self.detail,
            "variant": self.variant,
            "status": self.status,
            "bias": self.bias,
        }


@dataclass(frozen=True, slots=True, eq=False)
class Series:
    """One stock's arrays and the indicators every detector needs."""

    dates: np.ndarray
    open: np.ndarray
    high: np.ndarray
    low: np.ndarray
    close: np.ndarray
    volume: np.ndarray
    pct: np.ndarray
    atr: np.ndarray  # ATR before the bar (shifted by one)
    vol_avg: np.ndarray  # average volume before the bar
    locked: np.ndarray  # one-price limit bars
    has_volume: bool = True  # False: the volume rules are skipped (see the module doc)

    def vr(self, i: int) -> float:
        a = self.vol_avg[i]
        return float(self.volume[i] / a) if self.has_volume and a and not np.isnan(a) else float("nan")

    def vol_txt(self, i: int) -> str:
        """ ", volume 1.4× average" — or nothing when there is no volume to quote."""
        return f", volume {self.vr(i):.1f}× average" if self.has_volume else ""

    def d(self, i: int) -> date:
        day: date = self.dates[i].astype(object)  # datetime64[D] → date
        return day


def _fmt(x: float) -> str:
    return f"{x:,.2f}"


# ---- climaxes, AR, ST --------------------------------------------------------------------------
def find_climax(
    s: Series, rng: TradingRange | None, p: WyckoffParams, side: Literal["SC", "BC"]
) -> Event | None:
    if not s.has_volume:
        return None  # a climax is defined by its volume
    n = len(s.close)
    lo_i = max(p.climax_new_extreme, (rng.start if rng else n - 120) - 20)
    hi_i = min(n - 1, (rng.start + rng.age // 2) if rng else n - 1)
    best: tuple[float, int] | None = None
    for i in range(lo_i, hi_i + 1):
        if s.locked[i] or np.isnan(s.atr[i]) or np.isnan(s.vol_avg[i]):
            continue
        vr = s.vr(i)
        spread = (s.high[i] - s.low[i]) / s.atr[i]
        if vr < p.climax_vol or spread < p.climax_spread_atr:
            continue
        past = s.close[i - p.trend_lookback] if i >= p.trend_lookback else s.close[0]
        if side == "SC":
            if s.pct[i] >= 0 or s.low[i] > np.min(s.low[i - p.climax_new_extreme : i]):
                continue
            if s.close[i] > past * (1 - p.trend_min_move):
                continue
            score = -float(s.low[i]) + vr * 1e-6  # the climactic low: lowest low, then volume
        else:
            if s.pct[i] <= 0 or s.high[i] < np.max(s.high[i - p.climax_new_extreme : i]):
                continue
            if s.close[i] < past * (1 + p.trend_min_move):
                continue
            score = float(s.high[i]) + vr * 1e-6
        if best is None or score > best[0]:
            best = (score, i)
    if best is None:
        return None
    i = best[1]
    down = side == "SC"
    past = s.close[max(0, i - p.trend_lookback)]
    move = s.close[i] / past - 1
    return Event(
        side,
        i,
        s.d(i),
        float(s.low[i] if down else s.high[i]),
        s.vr(i),
        f"{'selling' if down else 'buying'} climax: volume {s.vr(i):.1f}× average, range "
        f"{(s.high[i] - s.low[i]) / s.atr[i]:.1f} ATR, {'lowest low' if down else 'highest high'} of "
        f"{p.climax_new_extreme} bars after a {move * 100:+.0f}% move over {p.trend_lookback} bars",
        bias="bullish" if down else "bearish",
    )


def find_ar(s: Series, climax: Event, p: WyckoffParams) -> Event | None:
    i = climax.index
    n = len(s.close)
    down = climax.kind == "SC"
    best_j = None
    for j in range(i + 1, min(n, i + 1 + p.ar_window)):
        if (down and s.low[j] < climax.price) or (not down and s.high[j] > climax.price):
            break
        if best_j is None or (s.high[j] > s.high[best_j] if down else s.low[j] < s.low[best_j]):
            best_j = j
    if best_j is None:
        return None
    j = best_j
    atr = s.atr[i] if not np.isnan(s.atr[i]) else np.nan
    travel = (s.high[j] - climax.price) if down else (climax.price - s.low[j])
    if np.isnan(atr) or travel < p.ar_min_atr * atr:
        return None
    price = float(s.high[j] if down else s.low[j])
    return Event(
        "AR",
        j,
        s.d(j),
        price,
        s.vr(j),
        f"automatic {'rally' if down else 'reaction'} to {_fmt(price)} ({travel / atr:.1f} ATR from the climax), "
        f"marks the range's initial {'resistance' if down else 'support'}",
        bias="neutral",
    )


def find_st(s: Series, climax: Event, ar: Event, p: WyckoffParams, limit: int = 3) -> list[Event]:
    out: list[Event] = []
    down = climax.kind == "SC"
    cv = s.volume[climax.index]
    n = len(s.close)
    last = -10
    for k in range(ar.index + 1, n):
        if s.locked[k] or np.isnan(s.atr[k]):
            continue
        tol = p.st_tol_atr * s.atr[k]
        near = abs(s.low[k] - climax.price) <= tol if down else abs(s.high[k] - climax.price) <= tol
        inside = (
            s.low[k] >= climax.price * (1 - p.st_max_beyond)
            if down
            else s.high[k] <= climax.price * (1 + p.st_max_beyond)
        )
        if near and inside and s.volume[k] <= p.st_vol_ratio * cv and k - last > 3:
            out.append(
                Event(
                    "ST",
                    k,
                    s.d(k),
                    float(s.low[k] if down else s.high[k]),
                    s.vr(k),
                    f"secondary test of the {'SC low' if down else 'BC high'} on {s.volume[k] / cv:.0%} of its volume",
                    bias="bullish" if down else "bearish",
                )
            )
            last = k
            if len(out) >= limit:
                break
    return out


# ---- springs and upthrusts ---------------------------------------------------------------------
def find_springs(s: Series, rng: TradingRange, p: WyckoffParams, end: int, first: int) -> list[Event]:
    out: list[Event] = []
    sup, mid, width = rng.support, rng.mid, rng.width
    first = max(first, 1)
    last_k = -10
    for t in range(first, end + 1):
        if s.locked[t] or t - last_k <= 3:
            continue
        low_pt = min(s.low[t - 1], s.low[t])
        if not (low_pt <= sup * (1 - p.pierce) and low_pt >= sup * (1 - p.spring_max_depth)):
            continue
        if not (s.close[t] > sup and s.close[t] < mid + p.spring_max_close_pos * width):
            continue
        if s.close[t - 1] > sup and s.low[t] > sup * (1 - p.pierce) and s.low[t - 1] <= sup * (1 - p.pierce):
            continue  # the previous bar already closed back inside: it was the spring bar
        vr = s.vr(t)
        if not s.has_volume:
            variant = "price_only"
        else:
            variant = (
                "low_volume" if vr <= p.spring_low_vol else "shakeout" if vr >= p.shakeout_vol else "normal"
            )
        status, test_txt = _spring_test(s, t, low_pt, sup, p, end)
        label = {
            "low_volume": "low-volume spring (no supply)",
            "shakeout": "shakeout (high-volume spring)",
            "normal": "spring",
            "price_only": "spring (price only: no volume data)",
        }[variant]
        out.append(
            Event(
                "Spring",
                t,
                s.d(t),
                float(low_pt),
                vr,
                f"{label}: low {_fmt(low_pt)} under support {_fmt(sup)} ({(low_pt / sup - 1) * 100:.1f}%), "
                f"closed back at {_fmt(s.close[t])}{s.vol_txt(t)}; {test_txt}",
                variant=variant,
                status=status,
                bias="bearish" if status == "failed" else "bullish",
            )
        )
        last_k = t
    return out


def _spring_test(s: Series, t: int, low_pt: float, sup: float, p: WyckoffParams, end: int) -> tuple[str, str]:
    """The spring's status. A close under the spring low fails it whenever it comes, also after a
    confirming test (the test only held until then)."""
    broken = next((k for k in range(t + 1, end + 1) if s.close[k] < low_pt), None)
    status, text = _spring_test_window(s, t, low_pt, sup, p, end, broken)
    if broken is not None and status != "failed":
        return "failed", f"{text}; then failed: closed under the spring low on {s.d(broken)}"
    return status, text


def _spring_test_window(
    s: Series, t: int, low_pt: float, sup: float, p: WyckoffParams, end: int, broken: int | None
) -> tuple[str, str]:
    sv = s.volume[t]
    for k in range(t + 1, min(end, t + p.test_window) + 1):
        if k == broken:
            return "failed", f"failed: closed under the spring low on {s.d(k)}"
        if not s.has_volume:
            continue  # the test is a volume test
        if s.locked[k] or k < t + 2:
            continue
        if (
            s.low[k] < s.low[k - 1]  # a pull-back into the test, not the spring's own follow-through
            and s.low[k] <= sup * (1 + p.touch_tol)
            and s.low[k] >= low_pt * (1 - p.test_max_undercut)
            and s.volume[k] <= p.test_vol_ratio * sv
            and (np.isnan(s.vol_avg[k]) or s.volume[k] <= s.vol_avg[k])
        ):
            return (
                "confirmed",
                f"test on {s.d(k)} held at {_fmt(s.low[k])} on {s.volume[k] / sv:.0%} of the spring's volume",
            )
    if not s.has_volume:
        return "untested", "no volume data: the low-volume test cannot be judged"
    if end - t < p.test_window:
        return "awaiting_test", "no test yet (still inside the test window)"
    return "untested", "no low-volume test followed"


def find_upthrusts(s: Series, rng: TradingRange, p: WyckoffParams, end: int, first: int) -> list[Event]:
    out: list[Event] = []
    res = rng.resistance
    last_k = -10
    for t in range(max(first, 1), end + 1):
        if s.locked[t] or t - last_k <= 3:
            continue
        hi = s.high[t]
        bar = hi - s.low[t]
        if bar <= 0 or not (hi >= res * (1 + p.pierce) and s.close[t] < res):
            continue
        if hi <= s.close[t - 1]:
            continue  # gapped down and never got back to the previous close: a break, not a thrust
        shadow = (hi - max(s.open[t], s.close[t])) / bar
        if shadow < p.upthrust_shadow:
            continue
        vr = s.vr(t)
        late = t >= rng.start + rng.age // 2
        kind: EventKind = "UTAD" if late and s.has_volume and vr >= p.shakeout_vol else "UT"
        failed_after = any(s.close[k] > hi for k in range(t + 1, end + 1))
        out.append(
            Event(
                kind,
                t,
                s.d(t),
                float(hi),
                vr,
                f"{'upthrust after distribution' if kind == 'UTAD' else 'upthrust'}: high {_fmt(hi)} over resistance "
                f"{_fmt(res)}, closed back at {_fmt(s.close[t])} (upper shadow {shadow:.0%}){s.vol_txt(t)}"
                + ("; later exceeded (failed)" if failed_after else ""),
                status="failed" if failed_after else "",
                bias="neutral" if failed_after else "bearish",
            )
        )
        last_k = t
    return out


# ---- SOS / SOW / LPS / LPSY --------------------------------------------------------------------
def find_breaks(s: Series, rng: TradingRange, p: WyckoffParams, end: int, first: int) -> list[Event]:
    out: list[Event] = []
    sup, res = rng.support, rng.resistance
    for t in range(max(first, 1), end + 1):
        if s.locked[t] or (s.has_volume and np.isnan(s.vol_avg[t])):
            continue
        vr = s.vr(t)
        if s.has_volume and vr < p.sos_vol:
            continue
        vol = f"volume {vr:.1f}× average" if s.has_volume else "no volume data (price only)"
        if (
            s.close[t] > res
            and s.close[t - 1] <= res * (1 + p.sos_max_prev_above)
            and s.pct[t] >= p.sos_min_pct
        ):
            out.append(
                Event(
                    "SOS",
                    t,
                    s.d(t),
                    float(s.close[t]),
                    vr,
                    f"sign of strength: closed {_fmt(s.close[t])} over resistance {_fmt(res)} on a {s.pct[t] * 100:+.1f}% "
                    f"move, {vol} (jump across the range top)",
                    bias="bullish",
                )
            )
        elif (
            s.close[t] < sup
            and s.close[t - 1] >= sup * (1 - p.sos_max_prev_above)
            and s.pct[t] <= -p.sos_min_pct
        ):
            out.append(
                Event(
                    "SOW",
                    t,
                    s.d(t),
                    float(s.close[t]),
                    vr,
                    f"sign of weakness: closed {_fmt(s.close[t])} under support {_fmt(sup)} on a {s.pct[t] * 100:+.1f}% "
                    f"move, {vol}",
                    bias="bearish",
                )
            )
    return out


def _swing_low(s: Series, k: int, end: int) -> bool:
    return s.low[k] <= s.low[k - 1] and (k == end or s.low[k] <= s.low[k + 1])


def _swing_high(s: Series, k: int, end: int) -> bool:
    return s.high[k] >= s.high[k - 1] and (k == end or s.high[k] >= s.high[k + 1])


def _light(s: Series, k: int, ref: int, p: WyckoffParams, need_avg: bool) -> bool:
    """Bar k's volume is light against the reference bar's (and the average); always true without
    volume data (the rule is then judged on price alone)."""
    if not s.has_volume:
        return True
    ok = bool(s.volume[k] <= p.lps_vol * s.volume[ref])
    return ok and (not need_avg or np.isnan(s.vol_avg[k]) or bool(s.volume[k] <= s.vol_avg[k]))


def _share(s: Series, k: int, ref: int, what: str) -> str:
    if not s.has_volume:
        return "(price only: no volume data)"
    return f"on {s.volume[k] / s.volume[ref]:.0%} of the {what} volume"


def find_lps(
    s: Series, rng: TradingRange, breaks: list[Event], springs: list[Event], p: WyckoffParams, end: int
) -> list[Event]:
    out: list[Event] = []
    res, sup = rng.resistance, rng.support
    for b in breaks:
        if b.kind == "SOS":
            peak = s.close[b.index]
            for k in range(b.index + 1, min(end, b.index + p.lps_window) + 1):
                peak = max(peak, s.close[k - 1])
                if s.locked[k] or not _swing_low(s, k, end):
                    continue
                if (
                    s.low[k] >= res * (1 - p.lps_tol)
                    and s.low[k] <= peak * 0.98
                    and _light(s, k, b.index, p, need_avg=True)
                ):
                    out.append(
                        Event(
                            "LPS",
                            k,
                            s.d(k),
                            float(s.low[k]),
                            s.vr(k),
                            f"last point of support: pullback to {_fmt(s.low[k])} held the broken resistance "
                            f"{_fmt(res)} {_share(s, k, b.index, 'SOS')}",
                            variant="after_sos",
                            bias="bullish",
                        )
                    )
                    break
        else:  # SOW → LPSY
            trough = s.close[b.index]
            for k in range(b.index + 1, min(end, b.index + p.lps_window) + 1):
                trough = min(trough, s.close[k - 1])
                if s.locked[k] or not _swing_high(s, k, end):
                    continue
                if (
                    s.high[k] <= sup * (1 + p.lps_tol)
                    and s.high[k] >= trough * 1.02
                    and _light(s, k, b.index, p, need_avg=False)
                ):
                    out.append(
                        Event(
                            "LPSY",
                            k,
                            s.d(k),
                            float(s.high[k]),
                            s.vr(k),
                            f"last point of supply: weak rally to {_fmt(s.high[k])} failed under the broken support "
                            f"{_fmt(sup)} {_share(s, k, b.index, 'SOW')}",
                            bias="bearish",
                        )
                    )
                    break
    for sp in springs:
        if sp.status == "failed":
            continue
        for k in range(sp.index + 2, min(end, sp.index + 30) + 1):
            if s.locked[k] or not _swing_low(s, k, end) or (s.has_volume and np.isnan(s.vol_avg[k])):
                continue
            if (
                s.low[k] > sp.price
                and s.low[k] <= sup + p.lps_in_range_pos * rng.width
                and s.close[k] > sup
                and (not s.has_volume or s.volume[k] <= p.lps_vol * s.vol_avg[k])
            ):
                out.append(
                    Event(
                        "LPS",
                        k,
                        s.d(k),
                        float(s.low[k]),
                        s.vr(k),
                        f"last point of support: higher low {_fmt(s.low[k])} after the spring ({_fmt(sp.price)}) "
                        + (
                            f"on light volume ({s.vr(k):.1f}× average)"
                            if s.has_volume
                            else "(price only: no volume data)"
                        ),
                        variant="after_spring",
                        bias="bullish",
                    )
                )
                break
    return out


def find_evr(s: Series, rng: TradingRange, p: WyckoffParams, end: int) -> list[Event]:
    out: list[Event] = []
    if not s.has_volume:
        return out  # effort is volume
    lo, hi = rng.support * 0.98, rng.resistance * 1.02
    for t in range(max(rng.start, end - p.evr_recent + 1, 1), end + 1):
        if s.locked[t] or np.isnan(s.vol_avg[t]):
            continue
        vr = s.vr(t)
        if vr >= p.evr_vol and abs(s.pct[t]) <= p.evr_band and lo <= s.close[t] <= hi:
            low_half = s.close[t] <= rng.mid
            out.append(
                Event(
                    "EvR",
                    t,
                    s.d(t),
                    float(s.close[t]),
                    vr,
                    f"effort without result: volume {vr:.1f}× average but only {s.pct[t] * 100:+.1f}% — "
                    + (
                        "absorption near support (demand meeting supply)"
                        if low_half
                        else "supply/churning near resistance"
                    ),
                    variant="absorption" if low_half else "supply",
                    bias="bullish" if low_half else "bearish",
                )
            )
    return out
