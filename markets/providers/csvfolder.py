"""A folder of CSV files the user points at: one `<code>.csv` per symbol (`600519.csv`,
`BTC-USDT.csv`), or long files with a `code` column. Headers may be English (date, open, high, low,
close, volume, amount) or akshare's Chinese names (日期, 开盘, 最高, 最低, 收盘, 成交量, 成交额).
The volume unit is declared by the user (default: shares; akshare/Tushare exports are lots)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from markets.bars import AmountUnit, Bars, VolumeUnit
from markets.errors import NoData
from markets.providers.csvload import bars_from_table, read_bytes, read_table
from markets.symbols import Instrument, normalize_cn_code, normalize_crypto


class CsvFolderProvider:
    name = "csv"
    local = True

    def __init__(
        self,
        folder: Path | str,
        *,
        volume_unit: VolumeUnit = "share",
        amount_unit: AmountUnit = "yuan",
        adjust: str = "none",
    ):
        self.folder = Path(folder).expanduser()
        if not self.folder.is_dir():
            raise NoData(f"CSV folder {self.folder} does not exist")
        self.volume_unit, self.amount_unit, self.adjust = volume_unit, amount_unit, adjust
        self._cache: dict[str, Bars] | None = None

    def reload(self) -> None:
        """Read the folder again on next use (after a data refresh: newer files may be there)."""
        self._cache = None

    def _load(self) -> dict[str, Bars]:
        if self._cache is not None:
            return self._cache
        out: dict[str, Bars] = {}
        for path in sorted(self.folder.iterdir()):
            if not path.name.endswith((".csv", ".csv.gz")):
                continue
            header, rows = read_table(read_bytes(path).decode("utf-8"))
            if not rows:
                continue
            if "code" in header:
                ci = header.index("code")
                groups: dict[str, list[list[str]]] = {}
                for r in rows:
                    groups.setdefault(r[ci].strip(), []).append(r)
                for raw_code, rs in groups.items():
                    self._put(out, raw_code, header, rs)
            else:
                self._put(out, path.name.split(".csv")[0], header, rows)
        self._cache = out
        return out

    def _put(self, out: dict[str, Bars], raw: str, header: list[str], rows: list[list[str]]) -> None:
        code = normalize_cn_code(raw)
        market = "cn"
        if code is None:
            code, market = normalize_crypto(raw) or raw.upper(), "crypto"
        out[code] = bars_from_table(
            code,
            header,
            rows,
            volume_unit=self.volume_unit if market == "cn" else "base",
            amount_unit=self.amount_unit,
            market=market,
            adjust=self.adjust,
            source=self.name,
        )

    def has(self, inst: Instrument) -> bool:
        return inst.symbol in self._load()

    def bars(self, inst: Instrument, start: date | str | None = None, end: date | str | None = None) -> Bars:
        b = self._load().get(inst.symbol)
        if b is None:
            raise NoData(f"no CSV for {inst.label} in {self.folder}")
        return b.between(start, end)

    def instruments(self) -> list[Instrument]:
        return [
            Instrument(s, s.split("/")[0], market="crypto", board="crypto")
            for s, b in self._load().items()
            if b.market == "crypto"
        ]

    def symbols(self, market: str = "cn") -> list[str]:
        return sorted(s for s, b in self._load().items() if b.market == market)

    def as_of(self, market: str = "cn") -> date | None:
        last = max(
            (b.dates[-1] for b in self._load().values() if len(b) and b.market == market), default=None
        )
        return None if last is None else last.astype(object)
