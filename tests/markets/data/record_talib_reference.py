"""Records TA-Lib reference values into talib_reference.json (run once, by hand, with the TA-Lib
wheel on the path; the tests only read the JSON, TA-Lib is not a dependency):

    pip install --target /tmp/talib TA-Lib
    PYTHONPATH=.:/tmp/talib python tests/markets/data/record_talib_reference.py tests/markets/data/talib_reference.json

Recorded with TA-Lib 0.8.2 (the PyPI wheel) on the bundled bars; values rounded to 1e-10.
"""

import json
import sys

import numpy as np
import talib  # type: ignore[import-not-found]

from markets.data import MarketData


def values(a: np.ndarray) -> list[float | None]:
    return [None if np.isnan(v) else round(float(v), 10) for v in a]


def main(path: str) -> None:
    md = MarketData()
    out: dict = {"talib_version": talib.__version__, "series": {}}
    for sym in ["600519", "300750", "002229", "601606"]:
        b = md.bars(sym)
        h, lo, c = (np.ascontiguousarray(x, dtype=float) for x in (b.high, b.low, b.close))
        out["series"][sym] = {
            "rsi14": values(talib.RSI(c, 14)),
            "rsi6": values(talib.RSI(c, 6)),
            "atr14": values(talib.ATR(h, lo, c, 14)),
        }
    flat = np.array([10.0] * 20 + [10.5, 10.4, 10.4, 10.6] + [10.6] * 20)
    out["flat"] = {"close": flat.tolist(), "rsi14": values(talib.RSI(flat, 14))}
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))


if __name__ == "__main__":
    main(sys.argv[1])
