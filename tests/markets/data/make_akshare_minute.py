"""Writes akshare_min_600519.json: two sessions of 1-minute bars for 600519 in the exact shape of
`ak.stock_zh_a_hist_min_em(symbol, start_date, end_date, period="1", adjust="")` rows (时间 as
"YYYY-MM-DD HH:MM:SS", 开盘/收盘/最高/最低 in CNY, 成交量 in lots, 成交额 in CNY, 均价 the running
average price). Hand-made (the machine that wrote the tests has no network), pinned to the bundled
daily bars of 2025-09-02 and 2025-09-03 (same open/high/low/close, volume within rounding).
Re-run to regenerate; the output is deterministic."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def minutes() -> list[str]:
    out = ["09:30"]
    for h, m0, m1 in ((9, 31, 60), (10, 0, 60), (11, 0, 31), (13, 1, 60), (14, 0, 60)):
        out += [f"{h:02d}:{m:02d}" for m in range(m0, m1)]
    return [*out, "15:00"]


def session(
    day: str, o: float, h: float, lo: float, c: float, lots: float, seed: int, hi_at: int, lo_at: int
):
    rng = np.random.default_rng(seed)
    ts = minutes()
    n = len(ts)
    # A path through open → (high, low in the given order) → close, with small noise.
    anchors = sorted([(0, o), (hi_at, h), (lo_at, lo), (n - 1, c)])
    path = np.interp(np.arange(n), [a for a, _ in anchors], [v for _, v in anchors])
    path = path + rng.normal(0, (h - lo) * 0.01, n)
    path = np.clip(path, lo, h)
    path[0], path[hi_at], path[lo_at], path[-1] = o, h, lo, c
    w = rng.gamma(2.0, 1.0, n)
    w[:30] *= 2.0  # busy open
    w[-15:] *= 1.6  # busy close
    vol = np.round(w / w.sum() * lots, 0)
    rows, cum_amt, cum_vol = [], 0.0, 0.0
    prev = o
    for i, t in enumerate(ts):
        close = round(float(path[i]), 2)
        op = round(prev, 2) if i else round(o, 2)
        hi = round(max(op, close) + (0 if i in (hi_at,) else abs(rng.normal(0, 0.3))), 2)
        low = round(min(op, close) - (0 if i in (lo_at,) else abs(rng.normal(0, 0.3))), 2)
        hi, low = min(hi, h), max(low, lo)
        if i == hi_at:
            hi = h
        if i == lo_at:
            low = lo
        amt = round(float(vol[i]) * 100 * (op + close + hi + low) / 4, 2)
        cum_amt += amt
        cum_vol += float(vol[i]) * 100
        rows.append(
            {
                "时间": f"{day} {t}:00",
                "开盘": op,
                "收盘": close,
                "最高": hi,
                "最低": low,
                "成交量": float(vol[i]),
                "成交额": amt,
                "均价": round(cum_amt / cum_vol, 3) if cum_vol else close,
            }
        )
        prev = close
    return rows


rows = session("2025-09-02", 1478.66, 1509.0, 1478.0, 1491.3, 56688.0, 1, hi_at=150, lo_at=3)
rows += session("2025-09-03", 1491.0, 1503.5, 1466.0, 1480.55, 45045.0, 2, hi_at=20, lo_at=170)
Path(__file__).with_name("akshare_min_600519.json").write_text(
    "[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n]\n", encoding="utf-8"
)
