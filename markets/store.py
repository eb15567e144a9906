"""The local bar store: a network provider's daily bars kept as files under $TAPEBOT_HOME/data/bars.

    store = BarStore(home / "data" / "bars")
    store.write("akshare", bars, fetched_at=now)        # merged with what is stored, by date
    store.read("akshare", "600519", "cn")               # Bars, or None when nothing is stored
    store.last("akshare", "cn")                         # the newest bar date of a market

One CSV per instrument (`<source>/<market>/<symbol>.csv`, canonical units: shares, yuan) and one
`<source>/meta.json` (per instrument: last bar date and fetch time; the provider's stock list), so
answers read local files (fast, and still there when the provider is unreachable) and anyone can
inspect or back the store up with ordinary tools. Writes replace files atomically.

Several processes share one store (the bot, `tapebot data update` from cron, replicas): the
metadata is read again whenever its file changed on disk, and a process writes only what it
changed, merged into the file as it is then under an exclusive lock — so a bot that never saw
another process's refresh still reports that refresh's dates, and never writes back its own
older copy over it.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np

from markets.bars import Adjust, Bars

_COLUMNS = ["date", "open", "high", "low", "close", "volume", "amount"]


@dataclass(frozen=True, slots=True)
class StoredInfo:
    """What the store knows of one instrument without reading its bars."""

    symbol: str
    market: str
    last: date
    fetched_at: datetime


def _file_key(symbol: str) -> str:
    return symbol.replace("/", "-")


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class BarStore:
    def __init__(self, folder: Path | str):
        self.folder = Path(folder).expanduser()
        self._lock = threading.RLock()
        self._meta: dict[str, dict[str, Any]] = {}
        self._seen: dict[str, tuple[int, int] | None] = {}  # the meta file's (mtime_ns, size) as read
        # what this process changed and has not written yet: instrument entries, a new stock list
        self._changes: dict[str, dict[str, Any]] = {}
        self._batch = 0  # inside batch(): metadata is written once at the end
        self._dirty: set[str] = set()

    # -- metadata ---------------------------------------------------------------------------------
    def _meta_path(self, source: str) -> Path:
        return self.folder / source / "meta.json"

    def _stamp(self, source: str) -> tuple[int, int] | None:
        try:
            st = self._meta_path(source).stat()
        except FileNotFoundError:
            return None
        return st.st_mtime_ns, st.st_size

    def _read_meta(self, source: str) -> dict[str, Any]:
        try:
            meta = json.loads(self._meta_path(source).read_text(encoding="utf-8"))
        except FileNotFoundError:
            meta = {}
        except ValueError:  # a damaged meta file: the bar files are still there, re-index them
            meta = {}
        if not isinstance(meta, dict):
            meta = {}
        meta.setdefault("instruments", {})
        meta.setdefault("stock_list", [])
        return meta

    def _apply_changes(self, source: str, meta: dict[str, Any]) -> dict[str, Any]:
        ch = self._changes.get(source)
        if ch:
            meta["instruments"].update(ch["instruments"])
            if ch["stock_list"] is not None:
                meta["stock_list"] = ch["stock_list"]
        return meta

    def _load_meta(self, source: str) -> dict[str, Any]:
        """The metadata as on disk now (read again when another process wrote it), with this
        process's unwritten changes on top."""
        stamp = self._stamp(source)
        if source not in self._meta or self._seen.get(source) != stamp:
            self._meta[source] = self._apply_changes(source, self._read_meta(source))
            self._seen[source] = stamp
        return self._meta[source]

    def _change(self, source: str) -> dict[str, Any]:
        return self._changes.setdefault(source, {"instruments": {}, "stock_list": None})

    def _save_meta(self, source: str) -> None:
        if self._batch:
            self._dirty.add(source)
            return
        path = self._meta_path(source)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_name(".meta.lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one writer at a time across processes
            try:
                meta = self._apply_changes(source, self._read_meta(source))
                # no indent: the C encoder (an indented dump of thousands of entries takes ~30 ms each)
                _atomic_write(path, json.dumps(meta, ensure_ascii=False))
                self._meta[source], self._seen[source] = meta, self._stamp(source)
                self._changes.pop(source, None)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Many writes, one metadata file write at the end (a refresh of thousands of symbols)."""
        with self._lock:
            self._batch += 1
        try:
            yield
        finally:
            with self._lock:
                self._batch -= 1
                if not self._batch:
                    for source in sorted(self._dirty):
                        self._save_meta(source)
                    self._dirty.clear()

    def info(self, source: str, symbol: str, market: str) -> StoredInfo | None:
        with self._lock:
            row = self._load_meta(source)["instruments"].get(f"{market}:{symbol}")
        if row is None:
            return None
        return StoredInfo(
            symbol, market, date.fromisoformat(row["last"]), datetime.fromisoformat(row["fetched_at"])
        )

    def infos(self, source: str, market: str | None = None) -> list[StoredInfo]:
        with self._lock:
            rows = dict(self._load_meta(source)["instruments"])
        out = []
        for key, row in sorted(rows.items()):
            m, _, sym = key.partition(":")
            if market is None or m == market:
                out.append(
                    StoredInfo(
                        sym, m, date.fromisoformat(row["last"]), datetime.fromisoformat(row["fetched_at"])
                    )
                )
        return out

    def last(self, source: str, market: str) -> date | None:
        """The newest bar date stored for a market (None when nothing is stored)."""
        return max((i.last for i in self.infos(source, market)), default=None)

    def stock_list(self, source: str) -> list[tuple[str, str]]:
        with self._lock:
            return [(str(c), str(n)) for c, n in self._load_meta(source)["stock_list"]]

    def put_stock_list(self, source: str, rows: list[tuple[str, str]]) -> None:
        with self._lock:
            listed = [[c, n] for c, n in rows]
            self._change(source)["stock_list"] = listed
            self._load_meta(source)["stock_list"] = listed
            self._save_meta(source)

    # -- bars -------------------------------------------------------------------------------------
    def _path(self, source: str, symbol: str, market: str) -> Path:
        return self.folder / source / market / f"{_file_key(symbol)}.csv"

    def read(self, source: str, symbol: str, market: str) -> Bars | None:
        path = self._path(source, symbol, market)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        rows = list(csv.reader(io.StringIO(text)))
        if len(rows) < 2:
            return None
        head, body = rows[0], rows[1:]
        adjust = head[len(_COLUMNS)] if len(head) > len(_COLUMNS) else "none"
        cols = list(zip(*[r[: len(_COLUMNS)] for r in body], strict=True))
        o, h, lo, c, v, a = (
            np.array([float(x) if x else np.nan for x in col], dtype=np.float64) for col in cols[1:]
        )
        return Bars(
            symbol,
            np.array(cols[0], dtype="datetime64[D]"),
            o,
            h,
            lo,
            c,
            v,
            a,
            market=market,
            adjust=cast(Adjust, adjust),
            source=source,
        )

    def write(self, source: str, bars: Bars, fetched_at: datetime, *, replace: bool = False) -> Bars:
        """Store `bars` (merged with the stored ones by date unless `replace`) and return the whole
        stored series."""
        if bars.empty:
            raise ValueError(f"no bars to store for {bars.symbol}")
        old = None if replace else self.read(source, bars.symbol, bars.market)
        merged = bars if old is None else _merge(old, bars)
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        w.writerow([*_COLUMNS, merged.adjust])
        for i in range(len(merged)):
            amt = float(merged.amount[i])
            w.writerow(
                [
                    str(merged.dates[i]),
                    repr(float(merged.open[i])),
                    repr(float(merged.high[i])),
                    repr(float(merged.low[i])),
                    repr(float(merged.close[i])),
                    repr(float(merged.volume[i])),
                    "" if amt != amt else repr(amt),
                ]
            )
        _atomic_write(self._path(source, merged.symbol, merged.market), out.getvalue())
        with self._lock:
            key = f"{merged.market}:{merged.symbol}"
            row = {"last": str(merged.dates[-1]), "fetched_at": fetched_at.isoformat()}
            self._change(source)["instruments"][key] = row
            self._load_meta(source)["instruments"][key] = row
            self._save_meta(source)
        return merged


def _merge(old: Bars, new: Bars) -> Bars:
    """Old bars before the new ones' first date, then the new ones (a provider's newer answer wins)."""
    keep = old.dates < new.dates[0]

    def cat(k: str) -> np.ndarray:
        return np.concatenate([getattr(old, k)[keep], getattr(new, k)])

    return Bars(
        new.symbol,
        cat("dates"),
        cat("open"),
        cat("high"),
        cat("low"),
        cat("close"),
        cat("volume"),
        cat("amount"),
        market=new.market,
        adjust=new.adjust,
        source=new.source,
    )
