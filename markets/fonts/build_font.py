"""Regenerate the CJK font subset (dev-time only; needs `pip install fonttools` and Debian fonts-noto-cjk).

python -m markets.fonts.build_font [/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc]
"""

from __future__ import annotations

import csv
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
SOURCE = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
EXTRA = "支撑阻力区间成交量均线日周月年涨跌幅收盘开盘最高最低权益曲线基准沪深净值回撤买入卖出信号弹簧测试吸筹派发阶段上涨下跌标记价格指数持仓盈亏现金策略回测股票代码名称截至数据来源行业"


def characters() -> str:
    chars = set(EXTRA)
    with (HERE.parent / "dataset" / "cn_stock_list.csv").open(encoding="utf-8") as f:
        for r in csv.DictReader(f):
            chars |= set(r["name"]) | set(r["industry"]) | set(r["area"])
    for b1 in range(0xB0, 0xD8):  # GB2312 level 1 (3,755 common characters)
        for b2 in range(0xA1, 0xFF):
            try:
                chars.add(bytes([b1, b2]).decode("gb2312"))
            except UnicodeDecodeError:
                pass
    return "".join(sorted(chars))


def main() -> None:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else SOURCE
    with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8", delete=False) as tf:
        tf.write(characters())
    subprocess.run(
        [
            "pyftsubset", str(src), "--font-number=2", f"--text-file={tf.name}",
            "--unicodes=U+0020-007E,U+00A0-00FF,U+2000-206F,U+3000-303F,U+FF00-FFEF,U+2190-21FF,U+25A0-25FF",
            f"--output-file={HERE / 'NotoSansCJKsc-Regular-subset.otf'}", "--layout-features=", "--no-hinting",
            "--desubroutinize",
        ],
        check=True,
    )  # fmt: skip


if __name__ == "__main__":
    main()
