"""Intraday rules on one session of minute bars: the day's read, the tail-session buy check and
the rescue check. Pure functions over `MinuteBars`; the tools (markets/tools_intraday.py) add the
daily context (previous close, the Wyckoff support as of the day before).

The tail-session check is the playbook 尾盘二次确认买入: "after 14:45 check support, VWAP,
the close position and volume; no buy when the confirmed support is broken or on an
extreme-volume spike that falls back". Each check is named and reported:

| check | passes when (defaults in IntradayParams) |
|---|---|
| tail_session | the data reaches 14:45 (`tail_start`) |
| support_held | the last price is at or above the support level |
| above_vwap | the last price is at or above the session's running VWAP |
| close_position | the last price is in the upper half of the session's range (≥ `close_pos_min`) |
| no_spike_and_fade | not (the session high was made within `spike_window` minutes of a minute with ≥ `spike_vol` × the session's median minute volume, and the price has since given back ≥ `fade` of the session's range) |

Verdict: `no_buy` when support is broken or on a spike-and-fade; `ok` when every check passes;
`wait` otherwise (before 14:45, under the VWAP, a weak close position).

Rescue check (a break of a level — a stop or a support — during the session):
`no_break` (the session low held the level); `rescued` (broke it, last price back at or above it
and at or above the VWAP); `reclaimed_under_vwap` (back above the level, still under the VWAP);
`not_rescued` (the last price is under the level).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from markets.minute import MinuteBars


@dataclass(frozen=True, slots=True)
class IntradayParams:
    tail_start: str = "14:45"
    spike_vol: float = 3.0  # a minute with ≥ 3 × the median minute volume is a volume spike
    spike_window: int = 5  # the high made within 5 minutes of (at or after) a spike minute
    fade: float = 0.5  # given back ≥ 50 % of the session's range from the high
    close_pos_min: float = 0.5
    edge_minutes: int = 30  # volume share of the first / last 30 minutes


DEFAULT_INTRADAY = IntradayParams()


def _hhmm(t: np.datetime64) -> str:
    return str(t)[11:16]


def _close_position(m: MinuteBars) -> float:
    hi, lo = float(m.high.max()), float(m.low.min())
    return 0.5 if hi == lo else (float(m.close[-1]) - lo) / (hi - lo)


def _spike_fade(m: MinuteBars, p: IntradayParams) -> tuple[bool, str]:
    hi_i = int(np.argmax(m.high))
    med = float(np.median(m.volume)) if len(m) else 0.0
    lo_i = max(0, hi_i - p.spike_window + 1)
    spike = med > 0 and bool((m.volume[lo_i : hi_i + 1] >= p.spike_vol * med).any())
    hi, lo, last = float(m.high.max()), float(m.low.min()), float(m.close[-1])
    gave_back = 0.0 if hi == lo else (hi - last) / (hi - lo)
    if spike and gave_back >= p.fade:
        peak = float(m.volume[lo_i : hi_i + 1].max())
        return True, (
            f"extreme-volume spike to {hi:,.2f} at {_hhmm(m.times[hi_i])} ({peak / med:.1f}× the median "
            f"minute volume) fell back {gave_back:.0%} of the session's range"
        )
    return False, "no extreme-volume spike that fell back"


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class TailCheck:
    verdict: Literal["ok", "wait", "no_buy"]
    reason: str
    checks: list[Check]
    last: float
    vwap: float
    support: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "checks": [c.to_dict() for c in self.checks],
            "last": round(self.last, 4),
            "vwap": round(self.vwap, 4),
            "support": round(self.support, 4),
        }


def tail_check(m: MinuteBars, support: float, params: IntradayParams | None = None) -> TailCheck:
    """The tail-session buy check of one session (see the module doc)."""
    p = params or DEFAULT_INTRADAY
    last, vwap = float(m.close[-1]), float(m.vwap()[-1])
    h, mi = (int(x) for x in p.tail_start.split(":"))
    tail_t = m.times[-1].astype("datetime64[D]") + np.timedelta64(h * 60 + mi, "m")
    in_tail = bool(m.times[-1] >= tail_t)
    pos = _close_position(m)
    fade, fade_txt = _spike_fade(m, p)
    checks = [
        Check(
            "tail_session",
            in_tail,
            f"data up to {_hhmm(m.times[-1])}"
            + ("" if in_tail else f"; the tail session starts at {p.tail_start}"),
        ),
        Check("support_held", last >= support, f"last {last:,.2f} vs support {support:,.2f}"),
        Check("above_vwap", last >= vwap, f"last {last:,.2f} vs VWAP {vwap:,.2f}"),
        Check("close_position", pos >= p.close_pos_min, f"at {pos:.0%} of the session's range"),
        Check("no_spike_and_fade", not fade, fade_txt),
    ]
    failed = [c for c in checks if not c.ok]
    if last < support:
        verdict, reason = "no_buy", f"the support {support:,.2f} is broken (last {last:,.2f})"
    elif fade:
        verdict, reason = "no_buy", fade_txt
    elif not failed:
        verdict, reason = "ok", "every tail-session check passes"
    elif not in_tail:
        verdict, reason = "wait", f"before the tail session: check again after {p.tail_start}"
    else:
        verdict, reason = "wait", "; ".join(f"{c.name}: {c.detail}" for c in failed)
    return TailCheck(verdict, reason, checks, last, vwap, support)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class RescueCheck:
    status: Literal["no_break", "rescued", "reclaimed_under_vwap", "not_rescued"]
    level: float
    low: float
    low_time: str
    last: float
    vwap: float
    rebound_volume_ratio: float | None  # volume per minute after the low / before it
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "level": round(self.level, 4),
            "low": round(self.low, 4),
            "low_time": self.low_time,
            "last": round(self.last, 4),
            "vwap": round(self.vwap, 4),
            "rebound_volume_ratio": None
            if self.rebound_volume_ratio is None
            else round(self.rebound_volume_ratio, 2),
            "detail": self.detail,
        }


def rescue_check(m: MinuteBars, level: float) -> RescueCheck:
    """Did a break of `level` during the session get reclaimed? (see the module doc)"""
    lo_i = int(np.argmin(m.low))
    low, last, vwap = float(m.low[lo_i]), float(m.close[-1]), float(m.vwap()[-1])
    before, after = m.volume[: lo_i + 1], m.volume[lo_i + 1 :]
    ratio = float(after.mean() / before.mean()) if len(after) and len(before) and before.mean() > 0 else None
    when = _hhmm(m.times[lo_i])
    if low >= level:
        status, detail = "no_break", f"the session low {low:,.2f} held {level:,.2f}"
    elif last < level:
        status, detail = (
            "not_rescued",
            f"broke {level:,.2f} at {when} (low {low:,.2f}) and is still under it ({last:,.2f})",
        )
    elif last >= vwap:
        status, detail = (
            "rescued",
            f"broke {level:,.2f} at {when} (low {low:,.2f}), reclaimed it and holds above the VWAP {vwap:,.2f}",
        )
    else:
        status, detail = (
            "reclaimed_under_vwap",
            f"broke {level:,.2f} at {when} (low {low:,.2f}), back above it but under the VWAP {vwap:,.2f}",
        )
    if ratio is not None and status != "no_break":
        detail += f"; volume per minute after the low is {ratio:.1f}× the volume before it"
    return RescueCheck(status, level, low, when, last, vwap, ratio, detail)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class IntradayRead:
    day: str
    as_of: str
    open: float
    high: float
    low: float
    last: float
    prev_close: float | None
    vwap: float
    high_time: str
    low_time: str
    minutes_above_vwap_pct: float
    close_position: float
    volume: float
    first_volume_pct: float
    last_volume_pct: float
    observations: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        chg = None if not self.prev_close else round((self.last / self.prev_close - 1) * 100, 2)
        return {
            "day": self.day,
            "as_of": self.as_of,
            "open": round(self.open, 4),
            "high": round(self.high, 4),
            "low": round(self.low, 4),
            "last": round(self.last, 4),
            "prev_close": self.prev_close,
            "change_pct": chg,
            "vwap": round(self.vwap, 4),
            "last_vs_vwap_pct": round((self.last / self.vwap - 1) * 100, 2),
            "high_time": self.high_time,
            "low_time": self.low_time,
            "minutes_above_vwap_pct": round(self.minutes_above_vwap_pct, 1),
            "close_position": round(self.close_position, 2),
            "volume_shares": self.volume,
            "first_30min_volume_pct": round(self.first_volume_pct, 1),
            "last_30min_volume_pct": round(self.last_volume_pct, 1),
            "observations": self.observations,
        }


def read_day(
    m: MinuteBars,
    prev_close: float | None = None,
    support: float | None = None,
    resistance: float | None = None,
    params: IntradayParams | None = None,
) -> IntradayRead:
    """One session at a glance: range, VWAP, where the volume traded, and what the levels did."""
    p = params or DEFAULT_INTRADAY
    vw = m.vwap()
    last, hi, lo = float(m.close[-1]), float(m.high.max()), float(m.low.min())
    hi_i, lo_i = int(np.argmax(m.high)), int(np.argmin(m.low))
    total = float(m.volume.sum())
    k = min(p.edge_minutes, len(m))
    first = 100 * float(m.volume[:k].sum()) / total if total else 0.0
    tail = 100 * float(m.volume[-k:].sum()) / total if total else 0.0
    above = 100 * float((m.close >= vw).mean())
    obs = [
        f"last {last:,.2f} is {(last / vw[-1] - 1) * 100:+.2f}% against the VWAP {vw[-1]:,.2f}; "
        f"{above:.0f}% of the minutes closed at or above it"
    ]
    obs.append(
        f"high {hi:,.2f} at {_hhmm(m.times[hi_i])}, low {lo:,.2f} at {_hhmm(m.times[lo_i])}; "
        f"the last price sits at {_close_position(m):.0%} of the range"
    )
    if support is not None:
        if lo < support <= last:
            obs.append(f"the low broke the daily support {support:,.2f} and price closed back above it")
        elif last < support:
            obs.append(f"under the daily support {support:,.2f}")
    if resistance is not None:
        if hi > resistance > last:
            obs.append(f"the high pierced the daily resistance {resistance:,.2f} and fell back under it")
        elif last > resistance:
            obs.append(f"over the daily resistance {resistance:,.2f}")
    obs.append(f"{first:.0f}% of the volume traded in the first {k} minutes, {tail:.0f}% in the last {k}")
    fade, fade_txt = _spike_fade(m, p)
    if fade:
        obs.append(fade_txt)
    return IntradayRead(
        day=str(m.day),
        as_of=str(m.times[-1]).replace("T", " "),
        open=float(m.open[0]),
        high=hi,
        low=lo,
        last=last,
        prev_close=prev_close,
        vwap=float(vw[-1]),
        high_time=_hhmm(m.times[hi_i]),
        low_time=_hhmm(m.times[lo_i]),
        minutes_above_vwap_pct=above,
        close_position=_close_position(m),
        volume=total,
        first_volume_pct=first,
        last_volume_pct=tail,
        observations=obs,
    )
