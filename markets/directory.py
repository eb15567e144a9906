"""Instrument directory: resolve any code form or name to one Instrument, search, suggest.

Resolution order for `resolve(query)`:
1. A-share code forms (`600519`, `600519.SH`, `sh600519`, `sh.600519`). A bare code is the stock;
   a code with an exchange must match the stock's exchange, else it names the index listed under
   that exchange (`000001.SH` / `sh000001` = 上证指数, while `000001` / `000001.SZ` = 平安银行),
   else it is rejected with `WrongExchange` naming the right suffix (`600519.SZ` → use 600519.SH);
2. index names (`沪深300`, `CSI300`, `上证指数`) and coin names (`比特币`, `以太坊`);
3. exact name (`贵州茅台`; ST prefixes and spaces ignored), then crypto symbols (`BTC`, `btcusdt`,
   `BTC-USD`, `BTC/USDT`);
4. exact pinyin initials (`GZMT`), when unique;
5. a unique name substring (`茅台`).
Anything else raises NotFound with up to 5 "did you mean" suggestions (close codes, names, initials).
"""

from __future__ import annotations

import csv
import difflib
import io
import re
from collections.abc import Iterable
from importlib import resources

from markets.errors import NotFound, WrongExchange
from markets.symbols import Instrument, board_of, exchange_of, is_st_name, normalize_crypto, parse_cn_code

INDEXES = [
    Instrument("000300", "沪深300", market="index", exchange="CSI", board="index"),
    Instrument("000001", "上证指数", market="index", exchange="SH", board="index"),
    Instrument("399001", "深证成指", market="index", exchange="SZ", board="index"),
    Instrument("399006", "创业板指", market="index", exchange="SZ", board="index"),
]
INDEX_ALIASES = {
    "沪深300": "000300",
    "CSI300": "000300",
    "CSI 300": "000300",
    "HS300": "000300",
    "000300.SH": "000300",
    "上证指数": "000001",
    "上证综指": "000001",
    "SSE COMPOSITE": "000001",
    "深证成指": "399001",
    "创业板指": "399006",
}
# Chinese (and English) names of the coins the bundled data and ccxt serve.
COIN_NAMES = {
    "比特币": "BTC",
    "以太坊": "ETH",
    "以太币": "ETH",
    "BITCOIN": "BTC",
    "ETHEREUM": "ETH",
}


def _norm_name(name: str) -> str:
    n = name.replace(" ", "").replace("Ａ", "A").upper()
    return n.lstrip("*").removeprefix("ST") if is_st_name(n) else n


def load_cn_instruments() -> list[Instrument]:
    """The bundled stock list (5,429 codes with name, area, industry) plus pinyin initials."""
    pkg = resources.files("markets.dataset")
    initials: dict[str, str] = {}
    text = pkg.joinpath("cn_stock_pinyin.csv").read_text("utf-8")
    for row in csv.DictReader(io.StringIO(text)):
        initials[row["symbol"]] = row["initials"]
    out = []
    for row in csv.DictReader(io.StringIO(pkg.joinpath("cn_stock_list.csv").read_text("utf-8"))):
        code = row["symbol"].strip()
        exch = row["ts_code"].split(".")[-1] if "." in row["ts_code"] else exchange_of(code)
        out.append(
            Instrument(
                symbol=code,
                name=row["name"].strip(),
                market="cn",
                exchange=exch,
                board=board_of(code),
                industry=(row.get("industry") or "").strip(),
                area=(row.get("area") or "").strip(),
                initials=initials.get(code, ""),
                is_st=is_st_name(row["name"]),
            )
        )
    return out


_CODE_IN_TEXT = re.compile(r"(?<![\d.])(?:(?:sh|sz|SH|SZ)\s?)?(\d{6})(?:\.(?:SH|SZ|sh|sz))?(?!\d)")


class Directory:
    def __init__(self, instruments: Iterable[Instrument] = ()):
        self._by_symbol: dict[str, Instrument] = {}
        self._by_name: dict[str, Instrument] = {}
        self._by_initials: dict[str, list[Instrument]] = {}
        for inst in [*INDEXES, *instruments]:
            self.add(inst)

    def add(self, inst: Instrument) -> None:
        key = inst.symbol if inst.market != "index" else f"IDX:{inst.symbol}"
        self._by_symbol[key] = inst
        if inst.name:
            self._by_name.setdefault(_norm_name(inst.name), inst)
        if inst.initials:
            self._by_initials.setdefault(inst.initials.upper().lstrip("*"), []).append(inst)

    def __len__(self) -> int:
        return len(self._by_symbol)

    def get(self, symbol: str) -> Instrument | None:
        return self._by_symbol.get(symbol)

    def all(self, market: str | None = None) -> list[Instrument]:
        return [i for i in self._by_symbol.values() if market is None or i.market == market]

    def index(self, code: str) -> Instrument | None:
        return self._by_symbol.get(f"IDX:{INDEX_ALIASES.get(code.strip().upper(), code.strip())}")

    def _resolve_code(self, q: str, code: str, exchange: str | None) -> Instrument:
        inst = self._by_symbol.get(code)
        idx = self._by_symbol.get(f"IDX:{code}")
        if inst and (exchange is None or inst.exchange == exchange):
            return inst
        # CSI indexes (000300) are quoted on both exchanges; an exchange index only on its own.
        if idx and (exchange is None or idx.exchange in (exchange, "CSI")):
            return idx
        if inst and exchange is not None:
            raise WrongExchange(q, exchange, inst.ts_code, inst.label)
        raise NotFound(q, self._suggest_code(code))

    # -- resolution -------------------------------------------------------------------------------
    def resolve(self, query: str) -> Instrument:
        q = query.strip()
        if not q:
            raise NotFound(query)
        parsed = parse_cn_code(q)
        if parsed:
            return self._resolve_code(q, *parsed)
        idx = self.index(q)
        if idx and q.upper() in INDEX_ALIASES:
            return idx
        coin = COIN_NAMES.get(q.upper())
        if coin and f"{coin}/USDT" in self._by_symbol:
            return self._by_symbol[f"{coin}/USDT"]
        name_hit = self._by_name.get(_norm_name(q))
        if name_hit:
            return name_hit
        pair = normalize_crypto(q)
        if pair and pair in self._by_symbol:
            return self._by_symbol[pair]
        ini = self._by_initials.get(q.upper())
        if ini and len(ini) == 1:
            return ini[0]
        if ini:
            raise NotFound(q, [i.label for i in ini[:5]], ambiguous=True)
        subs = self._substring(q)
        if len(subs) == 1:
            return subs[0]
        if subs:
            raise NotFound(q, [i.label for i in subs[:5]], ambiguous=True)
        raise NotFound(q, self._fuzzy(q))

    def search(self, query: str, limit: int = 10) -> list[Instrument]:
        """Ranked matches: exact resolution first, then name substrings, initials prefixes, fuzzy."""
        q = query.strip()
        if not q:
            return []
        seen: dict[str, Instrument] = {}

        def put(items: Iterable[Instrument]) -> None:
            for i in items:
                seen.setdefault(f"{i.market}:{i.symbol}", i)

        try:
            put([self.resolve(q)])
        except NotFound:
            pass
        put(self._substring(q))
        up = q.upper()
        if up.isascii() and up.isalpha():
            put(i for k, v in self._by_initials.items() if k.startswith(up) for i in v)
        if q.isdigit():
            put(i for s, i in self._by_symbol.items() if s.startswith(q))
        if len(seen) < limit:
            labels = self._fuzzy(q, n=limit)
            for lab in labels:
                code = lab.rsplit("(", 1)[-1].rstrip(")")
                hit = self._by_symbol.get(code)
                if hit:
                    put([hit])
        return list(seen.values())[:limit]

    def _substring(self, q: str) -> list[Instrument]:
        n = _norm_name(q)
        if len(n) < 2 or n.isdigit():
            return []
        return [i for k, i in self._by_name.items() if n in k and i.market != "index"]

    def _suggest_code(self, code: str) -> list[str]:
        # One wrong or swapped digit is the usual typo: rank by digit mismatches, then difflib.
        codes = [s for s in self._by_symbol if s.isdigit()]
        near = sorted(
            (sum(a != b for a, b in zip(code, c, strict=True)), c) for c in codes if c[:2] == code[:2]
        )
        picks = [c for d, c in near if d <= 1][:5]
        picks += [c for c in difflib.get_close_matches(code, codes, n=5, cutoff=0.6) if c not in picks]
        return [self._by_symbol[c].label for c in picks[:5]]

    def _fuzzy(self, q: str, n: int = 5) -> list[str]:
        names = list(self._by_name)
        hits = difflib.get_close_matches(_norm_name(q), names, n=n, cutoff=0.5)
        out = [self._by_name[h].label for h in hits]
        if q.isascii():
            ini = difflib.get_close_matches(q.upper(), list(self._by_initials), n=n, cutoff=0.6)
            out += [i.label for k in ini for i in self._by_initials[k]]
        return list(dict.fromkeys(out))[:n]

    @staticmethod
    def may_mention(text: str) -> bool:
        """False when `mentions` is sure to find nothing (no code, no Chinese): callers can skip
        loading the directory for such a text."""
        return bool(_CODE_IN_TEXT.search(text or "")) or any("\u4e00" <= ch <= "\u9fff" for ch in text or "")

    def mentions(self, text: str, limit: int = 8) -> list[str]:
        """Stock codes a text names, by code ("600519", "sh600519", "600519.SH") or by full name
        ("贵州茅台"); used to scope memory recall to the stocks a question is about."""
        found: list[str] = []
        for m in _CODE_IN_TEXT.finditer(text or ""):
            parsed = parse_cn_code(m.group(0).replace(" ", ""))
            inst = self._by_symbol.get(m.group(1))
            if parsed and parsed[1] and inst and inst.exchange != parsed[1]:
                continue  # "000001.SH" is the Shanghai Composite, not 平安银行
            if m.group(1) not in found:
                found.append(m.group(1))
        if any("\u4e00" <= ch <= "\u9fff" for ch in text or ""):
            for name, inst in self._by_name.items():
                if inst.market == "cn" and len(name) >= 2 and name in text and inst.symbol not in found:
                    found.append(inst.symbol)
                    if len(found) >= limit:
                        break
        return found[:limit]
