"""Whole-market screen: prints load time, panel build, screen wall time (median of `--runs`) and peak
memory.

    python bench/screen.py [DATA_FILE] [--runs 5]

Without DATA_FILE it screens the bundled dataset (markets/dataset/cn_daily.csv.gz, ~300 stocks),
so anyone can run it from a fresh clone. For the full universe (~3,000 stocks) pass the long CSV,
e.g. the steering repo's shared/data/cn_daily_full.csv.gz. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._env import add_runs_arg, footer, header, median_of, spread  # noqa: E402
from markets.data import MarketData  # noqa: E402
from markets.providers import BundledProvider  # noqa: E402
from markets.screen import ScreenConfig, screen  # noqa: E402


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, help="a long daily CSV (default: the bundled dataset)")
    add_runs_arg(parser)
    args = parser.parse_args()
    path: Path | None = args.data
    if path is not None and not path.is_file():
        sys.exit(f"missing {path}")
    header(f"screen over {path or 'the bundled dataset (markets/dataset)'}")
    t0 = time.perf_counter()
    md = MarketData([BundledProvider(cn_file=path)])
    n = len(md.providers[0].cn)  # type: ignore[attr-defined]
    t1 = time.perf_counter()
    panel = md.panel(min_bars=1)
    t2 = time.perf_counter()
    result = screen(md, ScreenConfig(), panel=panel)
    wall, samples = median_of(lambda: screen(md, ScreenConfig(), panel=panel), args.runs)
    print(f"universe: {n} stocks, panel {panel.shape[0]} x {panel.shape[1]} days, as of {result.as_of}")
    print(f"load csv.gz: {t1 - t0:.2f} s   build panel: {t2 - t1:.2f} s (once)")
    print(f"screen: median {wall:.3f} s {spread(samples, 1, ' s')}")
    print("funnel:", result.funnel)
    print(f"peak memory (max RSS): {peak_mb():.0f} MB")
    for p in result.picks[:5]:
        print(
            f"  #{p['rank']} {p['symbol']} {p['name']} score {p['score']} {p['triggers']} {p.get('phase', '')}"
        )
    footer()


if __name__ == "__main__":
    main()
