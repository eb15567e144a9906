"""Market data: units, code resolution, providers and the calendar."""

from __future__ import annotations

import gzip
from datetime import date

import numpy as np
import pytest
from markets_helpers import DATA

from markets.bars import Bars, amount_to_canonical, volume_to_canonical
from markets.calendar import TradingCalendar
from markets.data import MarketData
from markets.errors import NoData, NotFound, ProviderUnavailable
from markets.providers import BundledProvider, CsvFolderProvider
from markets.providers.csvload import read_long_cn
from markets.providers.network import (
    AkshareProvider,
    CcxtProvider,
    YFinanceProvider,
    parse_akshare_hist,
    parse_ccxt_ohlcv,
    parse_yfinance,
    yahoo_ticker,
)
from markets.symbols import limit_pct, normalize_cn_code, normalize_crypto


@pytest.fixture(scope="module")
def md() -> MarketData:
    return MarketData()


# ---- units -------------------------------------------------------------------------------------
def test_unit_conversions():
    assert volume_to_canonical(np.array([1.5]), "lot")[0] == 150.0
    assert volume_to_canonical(np.array([7.0]), "share")[0] == 7.0
    assert volume_to_canonical(np.array([0.25]), "base")[0] == 0.25
    assert amount_to_canonical(np.array([2.0]), "thousand_yuan")[0] == 2_000.0
    assert amount_to_canonical(np.array([3.0]), "yi")[0] == 3e8


def test_bundled_volume_is_in_shares(md):
    # Source row: 2025-09-03,600519,...,volume 45045.03 lots → 4,504,503 shares.
    raw = gzip.decompress((DATA / "fixtures_small.csv.gz").read_bytes())
    line = next(ln for ln in raw.decode().splitlines() if ln.startswith("2025-09-03,600519"))
    lots = float(line.split(",")[-1])
    b = md.bars("600519")
    assert b.volume[-1] == pytest.approx(lots * 100)
    assert b.amount_estimated and b.amount[-1] == pytest.approx(b.close[-1] * b.volume[-1])
    assert b.adjust == "qfq" and str(b.dates[-1]) == "2025-09-03"


def test_fixture_long_csv_parses():
    bars = read_long_cn(gzip.decompress((DATA / "fixtures_small.csv.gz").read_bytes()))
    assert len(bars) == 30 and all(len(b) == 320 for b in bars.values())
    b = bars["000001"]
    assert b.dates.dtype == np.dtype("datetime64[D]") and np.all(np.diff(b.dates).astype(int) > 0)
    assert np.all(b.high >= np.maximum(b.open, b.close)) and np.all(b.low <= np.minimum(b.open, b.close))


def test_from_columns_sorts_and_dedupes():
    b = Bars.from_columns(
        "X",
        ["2024-01-03", "2024-01-02", "2024-01-03"],
        [2, 1, 3],
        [2, 1, 3],
        [2, 1, 3],
        [2, 1, 3],
        [1, 1, 2],
        volume_unit="lot",
    )
    assert [str(d) for d in b.dates] == ["2024-01-02", "2024-01-03"]
    assert b.close.tolist() == [1, 3] and b.volume.tolist() == [100, 200]


# ---- resolution --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "query",
    [
        "600519",
        "600519.SH",
        "600519.SS",
        "sh600519",
        "SH600519",
        "sh.600519",
        "贵州茅台",
        "茅台",
        "GZMT",
        "gzmt",
        " 600519 ",
    ],
)
def test_resolve_forms(md, query):
    inst = md.resolve(query)
    assert (
        inst.symbol == "600519"
        and inst.name == "贵州茅台"
        and inst.exchange == "SH"
        and inst.industry == "白酒"
    )


def test_resolve_crypto_and_index(md):
    for q in ("BTC", "btc", "BTCUSDT", "BTC-USD", "BTC/USDT"):
        assert md.resolve(q).symbol == "BTC/USDT"
    assert md.resolve("eth").symbol == "ETH/USDT"
    assert md.resolve("沪深300").market == "index"
    assert len(md.index_bars("000300")) > 500


def test_unknown_code_suggests(md):
    with pytest.raises(NotFound) as exc:
        md.resolve("600518x")
    with pytest.raises(NotFound) as exc:
        md.resolve("699519")
    assert "did you mean" in str(exc.value)
    with pytest.raises(NotFound) as exc:
        md.resolve("贵州茅苔")
    assert "贵州茅台(600519)" in exc.value.suggestions


def test_ambiguous_name_lists_candidates(md):
    with pytest.raises(NotFound) as exc:
        md.resolve("平安")
    assert exc.value.ambiguous and "中国平安(601318)" in exc.value.suggestions


def test_search_ranks_exact_first(md):
    hits = md.search("平安")
    assert {"000001", "601318"} <= {i.symbol for i in hits}
    assert md.search("600519")[0].symbol == "600519"


def test_listed_without_bundled_bars(md):
    inst = md.resolve("688981")  # STAR, in the stock list, no bars in the demo set
    assert inst.board == "star" and inst.limit_pct == 0.20
    with pytest.raises(NoData, match="bundled"):
        md.bars(inst)


def test_code_normalisation_and_limits():
    assert normalize_cn_code("sz000001") == "000001" and normalize_cn_code("abc") is None
    assert normalize_crypto("eth-usd") == "ETH/USDT"
    assert limit_pct("main") == 0.10 and limit_pct("chinext") == 0.20 and limit_pct("main", True) == 0.05
    assert limit_pct("crypto") is None


def test_as_of_and_between(md):
    assert md.as_of("cn") == date(2025, 9, 3) and md.as_of("crypto") == date(2025, 7, 13)
    b = md.bars("600519", start="2025-08-01", end="2025-08-31")
    assert str(b.dates[0]) >= "2025-08-01" and str(b.dates[-1]) <= "2025-08-31"
    # the index runs past the stock data; it is clipped to the same "as of"
    assert md.index_bars().last_date == date(2025, 9, 3)


# ---- CSV folder --------------------------------------------------------------------------------
def test_csv_folder_chinese_headers_and_lots(tmp_path):
    (tmp_path / "600519.csv").write_text(
        "日期,开盘,收盘,最高,最低,成交量,成交额\n2024-01-02,10,11,12,9,5,5500\n2024-01-03,11,12,13,10,6,7200\n",
        encoding="utf-8",
    )
    (tmp_path / "BTC-USDT.csv").write_text("date,open,high,low,close,volume\n2024-01-01,1,2,0.5,1.5,0.25\n")
    md = MarketData([CsvFolderProvider(tmp_path, volume_unit="lot"), BundledProvider()])
    b = md.bars("600519")
    assert b.source == "csv" and b.close.tolist() == [11, 12] and b.volume.tolist() == [500, 600]
    assert b.amount.tolist() == [5500, 7200]
    assert md.bars("BTC").volume.tolist() == [0.25]  # crypto volume stays in base units
    assert md.bars("300750").source == "bundled"  # falls through to the next provider


# ---- network providers against hand-made responses ---------------------------------------------
class FakeAk:
    def __init__(self):
        self.calls = []

    def stock_zh_a_hist(self, **kw):
        self.calls.append(kw)
        return [
            {
                "日期": "2024-01-03",
                "股票代码": "600519",
                "开盘": 1700.0,
                "收盘": 1690.0,
                "最高": 1710.0,
                "最低": 1680.0,
                "成交量": 25000,
                "成交额": 4.2e9,
                "振幅": 1.7,
                "涨跌幅": -0.5,
                "涨跌额": -8.0,
                "换手率": 0.2,
            },
            {
                "日期": "2024-01-02",
                "股票代码": "600519",
                "开盘": 1720.0,
                "收盘": 1698.0,
                "最高": 1725.0,
                "最低": 1695.0,
                "成交量": 30000,
                "成交额": 5.1e9,
                "振幅": 1.8,
                "涨跌幅": -1.0,
                "涨跌额": -17.0,
                "换手率": 0.24,
            },
        ]

    def stock_info_a_code_name(self):
        return [{"code": "600519", "name": "贵州茅台"}, {"code": "1", "name": "平安银行"}]


def test_akshare_request_and_parse(md):
    ak = FakeAk()
    p = AkshareProvider(module=ak)
    b = p.bars(md.resolve("600519"), start="2024-01-01", end=date(2024, 1, 31))
    assert ak.calls == [
        {
            "symbol": "600519",
            "period": "daily",
            "start_date": "20240101",
            "end_date": "20240131",
            "adjust": "qfq",
        }
    ]
    assert [str(d) for d in b.dates] == ["2024-01-02", "2024-01-03"]
    assert b.volume.tolist() == [3_000_000, 2_500_000]  # lots → shares
    assert b.amount.tolist() == [5.1e9, 4.2e9] and not b.amount_estimated
    assert [i.symbol for i in p.instruments()] == ["600519", "000001"]
    with pytest.raises(NoData):
        parse_akshare_hist([], "600519")


def test_yfinance_parse_and_ticker(md):
    recs = [
        {"Date": "2024-01-02 00:00:00", "Open": 1.0, "High": 2.0, "Low": 0.5, "Close": 1.5, "Volume": 1000},
        {
            "Date": "2024-01-03 00:00:00",
            "Open": 1.5,
            "High": 2.5,
            "Low": 1.0,
            "Close": float("nan"),
            "Volume": 0,
        },
    ]
    b = parse_yfinance(recs, "600519")
    assert len(b) == 1 and b.volume[0] == 1000  # shares, NaN row dropped
    assert (
        yahoo_ticker(md.resolve("600519")) == "600519.SS"
        and yahoo_ticker(md.resolve("000001")) == "000001.SZ"
    )
    assert yahoo_ticker(md.resolve("BTC")) == "BTC-USD"

    class FakeYf:
        def download(self, ticker, **kw):
            assert ticker == "600519.SS" and kw["multi_level_index"] is False
            return recs[:1]

    assert len(YFinanceProvider(module=FakeYf()).bars(md.resolve("600519"))) == 1


def test_ccxt_parse_and_pagination(md):
    day = 86_400_000
    t0 = 1_704_067_200_000  # 2024-01-01T00:00Z
    rows = [[t0 + i * day, 100 + i, 110 + i, 90 + i, 105 + i, 2.5] for i in range(5)]
    b = parse_ccxt_ohlcv(rows, "BTC/USDT")
    assert str(b.dates[0]) == "2024-01-01" and b.volume[0] == 2.5 and b.amount[0] == pytest.approx(105 * 2.5)

    class Ex:
        def __init__(self, cfg):
            self.calls = []

        def fetch_ohlcv(self, symbol, timeframe, since, limit):
            self.calls.append(since)
            return [r for r in rows if r[0] >= since][:limit]

    class FakeCcxt:
        binance = Ex

    p = CcxtProvider(module=FakeCcxt(), page=2)
    got = p.bars(md.resolve("BTC"), start="2024-01-01")
    assert len(got) == 5 and len(p.client().calls) == 3


def test_missing_optional_library_is_a_clear_error(md, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_akshare(name, *a, **k):
        if name == "akshare":
            raise ImportError("no")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_akshare)
    with pytest.raises(ProviderUnavailable, match=r"tapebot\[akshare\]"):
        AkshareProvider().bars(md.resolve("600519"))


# ---- calendar ----------------------------------------------------------------------------------
def test_trading_calendar():
    cal = TradingCalendar.sse()
    assert cal.is_trading_day("2025-09-03") and not cal.is_trading_day("2025-10-01")  # National Day
    assert not cal.is_trading_day(date(2025, 9, 6))  # Saturday
    assert cal.next_trading_day("2025-09-30") == date(2025, 10, 9)
    assert cal.prev_trading_day("2025-10-09") == date(2025, 9, 30)
    assert len(cal.trading_days("2025-09-01", "2025-09-05")) == 5
    assert TradingCalendar.crypto().is_trading_day("2025-10-01")
    assert cal.is_trading_day("2027-03-01") and not cal.covers("2027-03-01")  # weekday fallback
