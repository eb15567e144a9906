"""Regenerate cn_stock_pinyin.csv from cn_stock_list.csv (dev-time only; needs `pip install pypinyin`)."""

from __future__ import annotations

import csv
from pathlib import Path

HERE = Path(__file__).parent


def main() -> None:
    from pypinyin import Style, lazy_pinyin

    with (HERE / "cn_stock_list.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    with (HERE / "cn_stock_pinyin.csv").open("w", encoding="utf-8", newline="") as out:
        w = csv.writer(out, lineterminator="\n")
        w.writerow(["symbol", "initials"])
        for r in rows:
            parts = lazy_pinyin(r["name"], style=Style.FIRST_LETTER, errors=lambda s: list(s))
            w.writerow([r["symbol"], "".join(p[0] for p in parts if p).upper()])


if __name__ == "__main__":
    main()
