"""ST (special treatment) status by date, for price limits in backtests.

A main-board ST stock trades within ±5 % instead of ±10 %, but only while it is ST. The stock list
knows today's status only; applying it to the whole history puts ±5 % limits on years when the
stock was not ST. When the data has the history — `cn_st_history.csv` in the data directory
(`code,start,end`: one row per ST spell, end empty while it lasts; codes not listed were never ST
in the file's range) — limits follow it day by day; otherwise today's status is used and the
result says so (`StStatus.note`).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from markets.symbols import limit_pct

if TYPE_CHECKING:
    from markets.data import MarketData

ST_FILE = "cn_st_history.csv"


@dataclass(frozen=True, slots=True)
class StHistory:
    """ST spells per code: [(start, end or None)], both days inclusive."""

    spells: dict[str, list[tuple[date, date | None]]]
    source: str

    @classmethod
    def load(cls, path: Path) -> StHistory:
        spells: dict[str, list[tuple[date, date | None]]] = {}
        with path.open(encoding="utf-8", newline="") as f:
            for n, row in enumerate(csv.DictReader(f), start=2):
                try:
                    code = row["code"].strip()
                    start = date.fromisoformat(row["start"].strip())
                    end = date.fromisoformat(e) if (e := (row.get("end") or "").strip()) else None
                except (KeyError, ValueError, AttributeError) as exc:
                    raise ValueError(
                        f"{path}:{n}: expected code,start,end with YYYY-MM-DD dates ({exc})"
                    ) from None
                spells.setdefault(code, []).append((start, end))
        return cls(spells, str(path))

    def flags(self, code: str, dates: np.ndarray) -> np.ndarray:
        """Whether `code` was ST on each of `dates` (datetime64[D])."""
        out = np.zeros(len(dates), dtype=bool)
        for start, end in self.spells.get(code.split(".")[0], []):
            hi = np.datetime64(end) if end else np.datetime64("9999-12-31")
            out |= (dates >= np.datetime64(start)) & (dates <= hi)
        return out


@dataclass(frozen=True, slots=True)
class StStatus:
    """Per-symbol, per-day limits and how the ST part of them was decided."""

    limits: np.ndarray  # [symbol, day] limit fraction (NaN: none)
    by_date: bool  # True: from an ST history; False: today's status for the whole period
    st_now: list[str] = field(default_factory=list)
    source: str = ""

    @property
    def note(self) -> str:
        if self.by_date:
            return f"ST status by date from {self.source} (±5% limits only while ST)"
        if not self.st_now:
            return "no stock in the universe is ST today; ST history is not in the data"
        return (
            f"ST status from today's stock list ({', '.join(self.st_now[:10])}): the data has no ST "
            "history, so their ±5% limit applies to the whole period"
        )


def st_history(data_dir: Path | str | None) -> StHistory | None:
    if data_dir is None or not (path := Path(data_dir) / ST_FILE).is_file():
        return None
    return StHistory.load(path)


def st_limits(
    data: MarketData, symbols: list[str], dates: np.ndarray, history: StHistory | None = None
) -> StStatus:
    """Daily limits per symbol and day: the board's, ±5 % on the days a main-board stock was ST
    (from `history`, else the data directory's ST file, else today's list)."""
    from markets.errors import NotFound

    hist = history if history is not None else st_history(data.calendar_dir)
    out = np.full((len(symbols), len(dates)), np.nan)
    st_now: list[str] = []
    for i, s in enumerate(symbols):
        try:
            inst = data.resolve(s)
        except NotFound:
            out[i] = 0.10
            continue
        if inst.market != "cn":
            continue
        if inst.is_st:
            st_now.append(inst.label)
        if hist is None:
            lim = inst.limit_pct
            out[i] = np.nan if lim is None else lim
            continue
        normal, st = limit_pct(inst.board, False), limit_pct(inst.board, True)
        if normal is None or st is None:
            continue
        out[i] = np.where(hist.flags(inst.symbol, dates), st, normal)
    return StStatus(out, hist is not None, st_now, hist.source if hist else "")
