"""The bundled demo dataset shipped in `markets/dataset/` (see DATA_SOURCES.md there):
300 liquid A-shares × 500 daily bars (qfq, volume in lots → shares), the CSI 300 index, BTC/USDT and
ETH/USDT daily bars. The data stops at its last bar, so every answer is "as of" that date.

Files are parsed lazily on first use and kept in memory (~15 MB)."""

from __future__ import annotations

import csv
import io
import threading
from datetime import date
from importlib import resources
from pathlib import Path

import numpy as np

from markets.bars import Bars, as_date64
from markets.errors import NoData
from markets.providers.csvload import read_bytes, read_long_cn
from markets.symbols import Instrument


class BundledProvider:
    """Serves the package's dataset. `cn_file` may point at another long CSV in the same format
    (e.g. the full 3,020-stock file for the bench)."""

    name = "bundled"
    local = True
    coverage = "bundled demo dataset: 300 liquid A-shares, CSI 300, BTC/USDT, ETH/USDT"

    def __init__(self, cn_file: Path | None = None):
        self._cn_file = cn_file
        self._lock = threading.Lock()
        self._cn: dict[str, Bars] | None = None
        self._crypto: dict[str, Bars] | None = None
        self._index: dict[str, Bars] | None = None

    # -- loading ----------------------------------------------------------------------------------
    def _pkg_bytes(self, name: str) -> bytes:
        return resources.files("markets.dataset").joinpath(name).read_bytes()

    @property
    def cn(self) -> dict[str, Bars]:
        if self._cn is None:
            with self._lock:
                if self._cn is None:
                    if self._cn_file is not None:
                        raw = read_bytes(self._cn_file)
                    else:
                        import gzip

                        raw = gzip.decompress(self._pkg_bytes("cn_daily.csv.gz"))
                    self._cn = read_long_cn(raw, volume_unit="lot", adjust="qfq", source=self.name)
        return self._cn

    @property
    def crypto(self) -> dict[str, Bars]:
        if self._crypto is None:
            with self._lock:
                if self._crypto is None:
                    self._crypto = parse_crypto_csv(self._pkg_bytes("crypto_daily.csv").decode())
        return self._crypto

    @property
    def indexes(self) -> dict[str, Bars]:
        if self._index is None:
            with self._lock:
                if self._index is None:
                    self._index = {
                        "000300": parse_index_csv(self._pkg_bytes("cn_index_000300.csv").decode(), "000300")
                    }
        return self._index

    # -- port -------------------------------------------------------------------------------------
    def has(self, inst: Instrument) -> bool:
        if inst.market == "cn":
            return inst.symbol in self.cn
        if inst.market == "crypto":
            return inst.symbol in self.crypto
        return inst.symbol in self.indexes

    def bars(self, inst: Instrument, start: date | str | None = None, end: date | str | None = None) -> Bars:
        table = {"cn": self.cn, "crypto": self.crypto, "index": self.indexes}[inst.market]
        b = table.get(inst.symbol)
        if b is None:
            raise NoData(
                f"no bars for {inst.label} in the bundled demo dataset (it holds 300 liquid A-shares, "
                "CSI 300, BTC/USDT, ETH/USDT); point a CSV folder at it or enable a network provider"
            )
        return b.between(start, end) if (start or end) else b

    def instruments(self) -> list[Instrument]:
        return [
            Instrument(s, s.split("/")[0], market="crypto", exchange="BINANCE", board="crypto")
            for s in self.crypto
        ]

    def symbols(self, market: str = "cn") -> list[str]:
        if market == "cn" and self._cn is None:
            return self._cn_codes()
        return sorted({"cn": self.cn, "crypto": self.crypto, "index": self.indexes}[market])

    def _cn_codes(self) -> list[str]:
        """The codes alone, without parsing ~150k bars into arrays (the directory needs only
        these, and building it must not cost the bars' memory)."""
        import gzip

        raw = (
            read_bytes(self._cn_file)
            if self._cn_file is not None
            else gzip.decompress(self._pkg_bytes("cn_daily.csv.gz"))
        )
        lines = raw.decode().splitlines()
        col = lines[0].split(",").index("code")
        return sorted({line.split(",")[col] for line in lines[1:] if line})

    def as_of(self, market: str = "cn") -> date | None:
        table = {"cn": self.cn, "crypto": self.crypto, "index": self.indexes}[market]
        last = max((b.dates[-1] for b in table.values() if len(b)), default=None)
        return None if last is None else last.astype(object)


def parse_crypto_csv(text: str) -> dict[str, Bars]:
    """`date,symbol,open,high,low,close,volume` (Binance spot, volume in base units)."""
    rows: dict[str, list[list[str]]] = {}
    for r in csv.DictReader(io.StringIO(text)):
        rows.setdefault(r["symbol"], []).append(
            [r["date"], r["open"], r["high"], r["low"], r["close"], r["volume"]]
        )
    out = {}
    for sym, rs in rows.items():
        cols = list(zip(*rs, strict=True))
        out[sym] = Bars.from_columns(
            sym,
            cols[0],
            *[np.array(c, dtype=float) for c in cols[1:6]],
            volume_unit="base",
            market="crypto",
            source="bundled",
        )
    return out


def parse_index_csv(text: str, code: str) -> Bars:
    """csindex export `date,open,high,low,close,amount_yi,pe` (no volume; amount in 亿 CNY)."""
    rows = list(csv.DictReader(io.StringIO(text)))

    def f(k: str) -> np.ndarray:
        return np.array([float(r[k]) for r in rows])

    return Bars.from_columns(
        code,
        [r["date"] for r in rows],
        f("open"),
        f("high"),
        f("low"),
        f("close"),
        np.zeros(len(rows)),
        f("amount_yi"),
        volume_unit="share",
        amount_unit="yi",
        market="index",
        source="bundled",
    )


def clip_to(b: Bars, end: date | None) -> Bars:
    """Bars up to `end` (inclusive): used to align the index (which runs past the stock data)."""
    return b if end is None else b.between(None, str(as_date64(end)))
