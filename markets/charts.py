"""PNG charts: candlesticks with volume, moving averages, the detected trading range and event
markers; equity curves against a benchmark.

matplotlib is imported lazily with the Agg backend and only its object API is used (no pyplot
global state), so charts render safely from worker threads. Chinese names render with the shipped
Noto Sans CJK SC subset (markets/fonts, SIL OFL 1.1); if that file is missing, a system CJK font is
used if one is installed, else titles fall back to codes (`cjk_font()` returns None).
A-share colours: red up, green down.

Failed springs and upthrusts are drawn hollow and grey with "failed" in their label; every event
the analysis lists is drawn (the window widens past the last 160 bars when one is older); labels
that would overlap move outward; volume ticks read 万/亿 (or K/M/B), never a "1e7" offset.

The range and the event markers are placed by date (`overlay`), not by bar index: the analysis
reads its own window (the last 500 bars) and the chart may be given a longer series, so an index
in one is not a position in the other. The chart also stops at the analysis's as-of bar.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass, field
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
FAILED = "#555555"  # a failed spring/upthrust: hollow grey marker, "failed" in its label
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
    """Where an analysis lands on the drawn bars: markers (x, kind, date), whether each marks a
    failed test (a spring or upthrust closed back through), and the range's span."""

    dates: np.ndarray
    markers: list[tuple[int, str, date]]
    span: tuple[int, int] | None
    failed: list[bool] = field(default_factory=list)

    @property
    def first_date(self) -> date:
        day: date = self.dates[0].astype(object)  # datetime64[D] → date
        return day

    def x_of(self, d: date) -> int | None:
        x = int(np.searchsorted(self.dates, np.datetime64(d, "D")))
        return x if x < len(self.dates) and self.dates[x] == np.datetime64(d, "D") else None


def bars_shown(bars: Bars, analysis: WyckoffAnalysis | None, last: int = 160) -> int:
    """How many bars the chart draws: `last`, widened so that every event the analysis lists
    (its `events`) is on the chart, with a few bars before the oldest."""
    if analysis is None:
        return last
    from markets.wyckoff.engine import LISTED_EVENTS

    listed = analysis.events[-LISTED_EVENTS:]
    if not listed:
        return last
    b = bars.between(None, analysis.as_of)
    first = int(np.searchsorted(b.dates, np.datetime64(listed[0].date, "D")))
    return max(last, len(b) - first + 5)


def overlay(bars: Bars, analysis: WyckoffAnalysis, last: int = 160) -> Overlay:
    """The analysis's events and range on the chart's bars: the last `last` of `bars` up to its
    as-of date, more when a listed event is older (`bars_shown`)."""
    b = bars.between(None, analysis.as_of).tail(bars_shown(bars, analysis, last))
    ov = Overlay(b.dates, [], None)
    markers: list[tuple[int, str, date]] = []
    failed: list[bool] = []
    for e in analysis.events:
        x = ov.x_of(e.date)
        if x is not None:
            markers.append((x, e.kind, e.date))
            failed.append(e.status == "failed" and e.kind in ("Spring", "UT", "UTAD"))
    span = None
    r = analysis.range
    if r is not None and r.end_date >= ov.first_date:
        x1 = ov.x_of(r.end_date)
        x0 = 0 if r.start_date < ov.first_date else ov.x_of(r.start_date)
        if x0 is not None and x1 is not None:
            span = (x0, x1)
    return Overlay(b.dates, markers, span, failed)


def volume_formatter(chinese: bool) -> Any:
    """Volume ticks as 1.2万 / 3.4亿 (Chinese) or 12K / 3.4M / 1.2B: never matplotlib's "1e7"
    offset, which sits at the top of the volume axis, on the price panel's edge."""
    from matplotlib.ticker import FuncFormatter

    steps = ((1e8, "亿"), (1e4, "万")) if chinese else ((1e9, "B"), (1e6, "M"), (1e3, "K"))

    def fmt(v: float, _pos: int | None = None) -> str:
        for size, unit in steps:
            if abs(v) >= size:
                return f"{_short(v / size)}{unit}"
        return _short(v)

    return FuncFormatter(fmt)


def _short(q: float) -> str:
    """1.5, 12, 350, 9999: one decimal below 10, none above, never an exponent."""
    text = f"{q:.1f}" if abs(q) < 10 else f"{q:.0f}"
    return text[:-2] if text.endswith(".0") else text


def _declutter(fig: Any, texts: list[tuple[Any, bool]]) -> None:
    """Move event labels that would overlap another label or a marker outward (down under the
    bars, up above them), one label height at a time, measured on the rendered figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.transforms import Bbox

    renderer = FigureCanvasAgg(fig).get_renderer()  # type: ignore[no-untyped-call]
    r = 3.5 * fig.dpi / 72.0  # a marker's half size (s=36 → 6 points across) in pixels
    placed: list[Any] = []
    for text, _ in texts:
        x, y = text.axes.transData.transform(text.xy)
        placed.append(Bbox.from_extents(x - r, y - r, x + r, y + r))
    to_points = 72.0 / fig.dpi
    for text, below in sorted(texts, key=lambda t: t[0].xy[0]):
        box = text.get_window_extent(renderer)
        for _ in range(30):
            if not any(box.overlaps(p) for p in placed):
                break
            dx, dy = text.xyann
            step = (box.height + 1.0) * to_points
            text.xyann = (dx, dy - step if below else dy + step)
            box = text.get_window_extent(renderer)
        placed.append(box)


def candles(
    bars: Bars,
    out_dir: Path,
    *,
    name: str = "",
    analysis: WyckoffAnalysis | None = None,
    last: int = 160,
    mas: tuple[int, ...] = (20, 50, 200),
) -> Path:
    """Candles + volume + MAs (+ range and events from `analysis`) for the last `last` bars (more
    when an event the analysis lists is older)."""
    fig = draw_candles(bars, name=name, analysis=analysis, last=last, mas=mas)
    path = _out(out_dir, f"{bars.symbol}_candles")
    fig.savefig(path, bbox_inches="tight")
    return path


def draw_candles(
    bars: Bars,
    *,
    name: str = "",
    analysis: WyckoffAnalysis | None = None,
    last: int = 160,
    mas: tuple[int, ...] = (20, 50, 200),
) -> Any:
    """The candle chart's matplotlib Figure (see `candles`)."""
    if analysis is not None:
        bars = bars.between(None, analysis.as_of)
    last = bars_shown(bars, analysis, last)
    n_all = len(bars)
    ma_lines = {n: sma(bars.close, n) for n in mas}
    b = bars.tail(last)
    off = n_all - len(b)
    x = np.arange(len(b))
    fig = _figure(11 if len(b) <= 200 else 14, 6.4)
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
    font = cjk_font()
    chinese = font is not None and "/" not in bars.symbol
    axv.yaxis.set_major_formatter(volume_formatter(chinese))
    axv.set_ylabel("成交量" if chinese else "volume", fontproperties=font if chinese else None)
    if chinese:
        for t in axv.get_yticklabels():
            t.set_fontproperties(font)

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
        texts = []
        for (i, kind, _), failed in zip(ov.markers, ov.failed, strict=True):
            marker, c = EVENT_STYLE.get(kind, ("o", "black"))
            below = marker == "^"
            y = b.low[i] * 0.985 if below else b.high[i] * 1.015
            if failed:  # hollow grey marker: the test failed, the event no longer counts
                ax.scatter([i], [y], marker=marker, facecolors="none", edgecolors=FAILED, s=36, zorder=5)
            else:
                ax.scatter([i], [y], marker=marker, color=c, s=36, zorder=5)
            text = ax.annotate(
                f"{kind} failed" if failed else kind,
                (i, y),
                textcoords="offset points",
                xytext=(0, -12 if below else 6),
                ha="center",
                fontsize=7,
                color=FAILED if failed else c,
                gid=f"event:{kind}:{'failed' if failed else 'ok'}",
            )
            texts.append((text, below))
        _declutter(fig, texts)

    ticks = np.linspace(0, len(b) - 1, 8).astype(int)
    axv.set_xticks(ticks)
    axv.set_xticklabels([str(b.dates[i]) for i in ticks], fontsize=8)
    ax.tick_params(labelbottom=False)
    ax.grid(alpha=0.2)
    ax.legend(loc="upper left", fontsize=8)
    label = f"{name}({bars.symbol})" if name else bars.symbol
    phase = f" · {analysis.phase.label}" if analysis is not None else ""
    text, tfont = _title(
        f"{label}{phase} · as of {b.dates[-1]}", f"{bars.symbol}{phase} · as of {b.dates[-1]}"
    )
    ax.set_title(text, fontproperties=tfont, fontsize=11)
    return fig


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
