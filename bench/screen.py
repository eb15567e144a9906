"""Whole-market screen: prints load time, screen wall time and peak memory.

    python bench/screen.py [BARS.csv.gz]

The figures in the project's notes are for the full universe (~3,000 stocks,
`cn_daily_full.csv.gz`, 40 MB, kept outside the repository in the steering repo's shared/data, so
it is looked for at ../shared/data). Without it the bundled 300-stock dataset is screened instead,
and the output says so. Any file of daily bars with the header `date,code,open,high,low,close,volume`
(volume in lots of 100 shares) works, e.g. one exported with the `akshare` extra."""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from markets.data import MarketData  # noqa: E402
from markets.providers import BundledProvider  # noqa: E402
from markets.screen import ScreenConfig, screen  # noqa: E402

FULL = ROOT.parent / "shared" / "data" / "cn_daily_full.csv.gz"


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    path: Path | None = Path(sys.argv[1]) if len(sys.argv) > 1 else FULL
    assert path is not None
    if not path.is_file():
        if len(sys.argv) > 1:
            sys.exit(f"missing {path}")
        print(
            f"note: {FULL} not found; screening the bundled 300 stocks instead "
            "(pass a bars file for the whole market: see this script's docstring)"
        )
        path = None
    t0 = time.perf_counter()
    md = MarketData([BundledProvider(cn_file=path)])
    n = len(md.providers[0].cn)  # type: ignore[attr-defined]
    t1 = time.perf_counter()
    panel = md.panel(min_bars=1)
    t2 = time.perf_counter()
    stages: list[tuple[str, float]] = []
    result = screen(
        md, ScreenConfig(), panel=panel, progress=lambda s, d, p: stages.append((s, time.perf_counter()))
    )
    t3 = time.perf_counter()
    print(f"universe: {n} stocks, panel {panel.shape[0]} x {panel.shape[1]} days, as of {result.as_of}")
    print(
        f"load csv.gz: {t1 - t0:.2f} s   build panel: {t2 - t1:.2f} s   screen: {t3 - t2:.2f} s   total: {t3 - t0:.2f} s"
    )
    print("funnel:", result.funnel)
    print(f"peak memory (max RSS): {peak_mb():.0f} MB")
    for p in result.picks[:5]:
        print(
            f"  #{p['rank']} {p['symbol']} {p['name']} score {p['score']} {p['triggers']} {p.get('phase', '')}"
        )


if __name__ == "__main__":
    main()
