"""Name resolution: index codes with an exchange, wrong exchange suffixes, and
Chinese names of the coins."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from markets.data import MarketData
from markets.directory import Directory, load_cn_instruments
from markets.errors import NotFound, WrongExchange

MD = MarketData()


@pytest.mark.parametrize("query", ["000001.SH", "sh000001", "SH000001", "sh.000001", "000001.SS", "上证指数"])
def test_shanghai_composite_codes_resolve_to_the_index(query):
    inst = MD.resolve(query)
    assert inst.market == "index" and inst.symbol == "000001" and inst.name == "上证指数"


@pytest.mark.parametrize("query", ["000001", "000001.SZ", "sz000001", "平安银行"])
def test_ping_an_bank_keeps_its_codes(query):
    inst = MD.resolve(query)
    assert inst.market == "cn" and inst.name == "平安银行" and inst.exchange == "SZ"


def test_csi300_with_either_suffix_is_the_index():
    assert MD.resolve("000300.SH").market == "index"
    assert MD.resolve("沪深300").symbol == "000300"


@pytest.mark.parametrize(
    ("query", "right"),
    [("600519.SZ", "600519.SH"), ("sz600519", "600519.SH"), ("000858.SH", "000858.SZ")],
)
def test_a_wrong_exchange_suffix_is_rejected_with_the_right_one(query, right):
    with pytest.raises(WrongExchange) as exc:
        MD.resolve(query)
    assert right in str(exc.value) and isinstance(exc.value, NotFound)
    assert exc.value.suggestions and right in exc.value.suggestions[0]


@pytest.mark.parametrize(
    ("query", "symbol"), [("比特币", "BTC/USDT"), ("以太坊", "ETH/USDT"), ("以太币", "ETH/USDT")]
)
def test_chinese_coin_names_resolve(query, symbol):
    assert MD.resolve(query).symbol == symbol
    assert MD.search(query)[0].symbol == symbol


_DIR = Directory(load_cn_instruments())
_STOCKS = [i for i in _DIR.all("cn")]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(_STOCKS), st.sampled_from(["{c}.{x}", "{x}{c}", "{xl}{c}", "{c}.{xl}"]))
def test_every_listed_stock_resolves_with_its_own_exchange_and_never_with_another(inst, form):
    x = inst.exchange
    assert _DIR.resolve(form.format(c=inst.symbol, x=x, xl=x.lower())).symbol == inst.symbol
    other = "SZ" if x == "SH" else "SH"
    q = form.format(c=inst.symbol, x=other, xl=other.lower())
    try:
        got = _DIR.resolve(q)
    except WrongExchange:
        return
    assert got.market == "index"  # only an index may own the other exchange's code (000001.SH)


def test_mentions_do_not_take_an_index_code_for_the_stock():
    assert MD.directory.mentions("上证 000001.SH 和 sh600519 怎么样") == ["600519"]
    assert MD.directory.mentions("平安银行 000001.SZ") == ["000001"]
