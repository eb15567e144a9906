"""PNG charts: candlesticks with volume, moving averages, the detected trading range and event
markers; equity curves against a benchmark.

matplotlib is imported lazily with the Agg backend and only its object API is used (no pyplot
global state), so charts render safely from worker threads. Chinese names render with the shipped
Noto Sans CJK SC subset (markets/fonts, SIL OFL 1.1); if that file is missing, a system CJK font is
used if one is installed, else titles fall back to codes (`cjk_font()` returns None).
A-share colours: red up, green down.

The range and the event markers are placed by date (`overlay`), not by bar index: the analysis
reads its own window (the last 500 bars) and the chart may be given a longer series, so an index
in one is not a position in the other. The chart also stops at the analysis's as-of bar.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from datetime import date
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from markets.bars import Bars
from markets.indicators import sma

if TYPE_CHECKING:
    from markets.wyckoff.engine import WyckoffAnalysis

UP, DOWN = "#d62728", "#2ca02c"
EVENT_STYLE = {
    "SC": ("v", "#1f77b4"),
    "BC": ("^", "#8c564b"),
    "AR": ("^", "#17becf"),
    "ST": ("o", "#7f7f7f"),
    "Spring": ("^", "#d62728"),
    "UT": ("v", "#ff7f0e"),
    "UTAD": ("v", "#ff7f0e"),
    "SOS": ("^", "#9467bd"),
    "SOW": ("v", "#9467bd"),
    "LPS": ("^", "#e377c2"),
    "LPSY": ("v", "#e377c2"),
    "EvR": ("D", "#bcbd22"),
}
FONT_FILE = "NotoSansCJKsc-Regular-subset.otf"


@functools.lru_cache(maxsize=1)
def cjk_font() -> Any:
    """FontProperties for Chinese text, or None when no CJK font is available."""
    from matplotlib import font_manager

    try:
        path = resources.files("markets.fonts").joinpath(FONT_FILE)
        with resources.as_file(path) as p:
            if Path(p).is_file():
                font_manager.fontManager.addfont(str(p))
                return font_manager.FontProperties(fname=str(p))
    except (ModuleNotFoundError, FileNotFoundError):
        pass
    for f in font_manager.fontManager.ttflist:
        if any(k in f.name for k in ("Noto Sans CJK", "WenQuanYi", "Droid Sans Fallback", "SimHei")):
            return font_manager.FontProperties(fname=f.fname)
    return None


def _figure(w: float, h: float) -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h), dpi=110)


def _title(text_cn: str, fallback: str) -> tuple[str, Any]:
    font = cjk_font()
    if font is None or text_cn.isascii():
        return (fallback if font is None else text_cn), None if font is None else font
    return text_cn, font


def _out(out_dir: Path, stem: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    safe = "".join(ch if ch.isalnum() else "_" for ch in stem)
    return out_dir / f"{safe}_{uuid.uuid4().hex[:8]}.png"


@dataclass(frozen=True, slots=True)
class Overlay:
    """Where an analysis lands on the drawn bars: markers (x, kind, date) and the range's span."""

    dates: np.ndarray
    markers: list[tuple[int, str, date]]
    span: tuple[int, int] | None

    @property
    def first_date(self) -> date:
        day: date = self.dates[0].astype(object)  # datetime64[D] → date
        return day

    def x_of(self, d: date) -> int | None:
        x = int(np.searchsorted(self.dates, np.datetime64(d, "D")))
        return x if x < len(self.dates) and self.dates[x] == np.datetime64(d, "D") else None


def overlay(bars: Bars, analysis: WyckoffAnalysis, last: int = 160) -> Overlay:
    """The analysis's events and range on the last `last` bars of `bars` (up to its as-of date)."""
    b = bars.between(None, analysis.as_of).tail(last)
    ov = Overlay(b.dates, [], None)
    markers: list[tuple[int, str, date]] = []
    for e in analysis.events:
        x = ov.x_of(e.date)
        if x is not None:
            markers.append((x, e.kind, e.date))
    span = None
    r = analysis.range
    if r is not None and r.end_date >= ov.first_date:
        x1 = ov.x_of(r.end_date)
        x0 = 0 if r.start_date < ov.first_date else ov.x_of(r.start_date)
        if x0 is not None and x1 is not None:
            span = (x0, x1)
    return Overlay(b.dates, markers, span)


def candles(
    bars: Bars,
    out_dir: Path,
    *,
    name: str = "",
    analysis: WyckoffAnalysis | None = None,
    last: int = 160,
    mas: tuple[int, ...] = (20, 50, 200),
) -> Path:
    """Candles + volume + MAs (+ range and events from `analysis`) for the last `last` bars."""
    if analysis is not None:
        bars = bars.between(None, analysis.as_of)
    n_all = len(bars)
    ma_lines = {n: sma(bars.close, n) for n in mas}
    b = bars.tail(last)
    off = n_all - len(b)
    x = np.arange(len(b))
    fig = _figure(11, 6.4)
    gs = fig.add_gridspec(4, 1, hspace=0.05)
    ax = fig.add_subplot(gs[:3, 0])
    axv = fig.add_subplot(gs[3, 0], sharex=ax)
    up = b.close >= b.open
    colors = np.where(up, UP, DOWN)
    ax.vlines(x, b.low, b.high, colors=colors, linewidth=0.8)
    body_lo = np.minimum(b.open, b.close)
    body_h = np.maximum(np.abs(b.close - b.open), (b.high - b.low).max() * 0.002)
    ax.bar(x, body_h, bottom=body_lo, width=0.7, color=colors, edgecolor=colors, linewidth=0.5)
    for n, line in ma_lines.items():
        ax.plot(x, line[off:], linewidth=1.0, label=f"MA{n}")
    axv.bar(x, b.volume, width=0.7, color=colors)
    axv.set_ylabel("volume")

    ov = overlay(bars, analysis, last) if analysis is not None else None
    if analysis is not None and analysis.range is not None and ov is not None:
        r = analysis.range
        for level, label, c in ((r.support, "support", DOWN), (r.resistance, "resistance", UP)):
            x_from = ov.span[0] if ov.span else 0
            ax.hlines(level, x_from, len(b) - 1, colors=c, linestyles="--", linewidth=1.0)
            ax.text(len(b) - 1, level, f" {label} {level:,.2f}", va="center", fontsize=8, color=c)
        if ov.span:
            ax.axvspan(ov.span[0] - 0.5, ov.span[1] + 0.5, color="#999999", alpha=0.08)
    if ov is not None:
        for i, kind, _ in ov.markers:
            marker, c = EVENT_STYLE.get(kind, ("o", "black"))
            below = marker == "^"
            y = b.low[i] * 0.985 if below else b.high[i] * 1.015
            ax.scatter([i], [y], marker=marker, color=c, s=36, zorder=5)
            ax.annotate(
                kind,
                (i, y),
                textcoords="offset points",
                xytext=(0, -12 if below else 6),
                ha="center",
                fontsize=7,
                color=c,
            )

    ticks = np.linspace(0, len(b) - 1, 8).astype(int)
    axv.set_xticks(ticks)
    axv.set_xticklabels([str(b.dates[i]) for i in ticks], fontsize=8)
    ax.tick_params(labelbottom=False)
    ax.grid(alpha=0.2)
    ax.legend(loc="upper left", fontsize=8)
    label = f"{name}({bars.symbol})" if name else bars.symbol
    phase = f" · {analysis.phase.label}" if analysis is not None else ""
    text, font = _title(
        f"{label}{phase} · as of {b.dates[-1]}", f"{bars.symbol}{phase} · as of {b.dates[-1]}"
    )
    ax.set_title(text, fontproperties=font, fontsize=11)
    path = _out(out_dir, f"{bars.symbol}_candles")
    fig.savefig(path, bbox_inches="tight")
    return path


def equity_curve(
    dates: np.ndarray,
    equity: np.ndarray,
    out_dir: Path,
    *,
    benchmark: np.ndarray | None = None,
    title: str = "Equity curve",
    benchmark_label: str = "沪深300",
) -> Path:
    """Strategy equity (normalised to 1.0) and an optional benchmark on the same dates, with drawdown."""
    fig = _figure(10, 5.5)
    gs = fig.add_gridspec(3, 1, hspace=0.08)
    ax = fig.add_subplot(gs[:2, 0])
    axd = fig.add_subplot(gs[2, 0], sharex=ax)
    x = np.arange(len(dates))
    eq = equity / equity[0]
    ax.plot(x, eq, color="#1f77b4", linewidth=1.4, label="strategy")
    font = cjk_font()
    if benchmark is not None and len(benchmark) == len(eq):
        valid = ~np.isnan(benchmark)
        if valid.any():
            first = benchmark[valid][0]
            ax.plot(
                x,
                benchmark / first,
                color="#7f7f7f",
                linewidth=1.0,
                label=benchmark_label if font is not None else "CSI 300",
            )
    peak = np.maximum.accumulate(eq)
    axd.fill_between(x, eq / peak - 1, 0, color=DOWN, alpha=0.4)
    axd.set_ylabel("drawdown")
    ticks = np.linspace(0, len(dates) - 1, 8).astype(int)
    axd.set_xticks(ticks)
    axd.set_xticklabels([str(dates[i]) for i in ticks], fontsize=8)
    ax.tick_params(labelbottom=False)
    ax.grid(alpha=0.2)
    ax.legend(loc="upper left", fontsize=8, prop=font)
    text, tfont = _title(title, title.encode("ascii", "ignore").decode() or "Equity curve")
    ax.set_title(text, fontproperties=tfont, fontsize=11)
    path = _out(out_dir, "equity")
    fig.savefig(path, bbox_inches="tight")
    return path
