"""Exactly once, bound to the order.

The execution key binds the order itself — session, tool, canonical arguments and call id — so a
provider that reuses call ids cannot make a new order replay an old fill, while the same call
retried replays. An MCP client's `idempotency_key` holds across server processes and restarts, and
a key reused for a different order is an error naming the first order."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markets_helpers import make_sessions
from mcp import Client

from agent.ports import execution_key
from agent.tools.registry import Deps, ToolContext
from bot.mcp_gate import IDEMPOTENCY_ARG
from bot.mcp_server import build_mcp_server
from markets.broker import PaperBroker
from markets.data import MarketData
from markets.errors import IdempotencyConflict
from markets.services import MarketServices
from markets.tools import market_tools

MD = MarketData()


@pytest.fixture
async def svc(tmp_path):
    engine, sessions = await make_sessions(tmp_path)
    yield MarketServices(data=MD, session_factory=sessions, results_dir=tmp_path / "results")
    await engine.dispose()


def _ctx(svc: MarketServices, call_id: str, session: str = "s1") -> ToolContext:
    return ToolContext(call_id=call_id, session_id=session, user_id="u1", deps=Deps(svc))


async def test_e1_reused_call_id_with_other_arguments_is_a_new_order(svc):
    """A provider reuses call id "call_0" for a different order; the user asked for 600036 and
    must get 600036, not the earlier 600519 fill marked "replayed"."""
    tool = market_tools.get("execute_trade")
    first = await tool.call(_ctx(svc, "call_0"), {"code": "600519", "side": "buy", "quantity": 100})
    second = await tool.call(_ctx(svc, "call_0"), {"code": "600036", "side": "buy", "quantity": 100})
    assert first["symbol"] == "600519" and not first["replayed"]
    assert second["symbol"] == "600036" and not second["replayed"] and second["status"] == "filled"
    positions = await PaperBroker(svc.sessions(), MD).portfolio.positions("u1")
    assert sorted(p.symbol for p in positions) == ["600036", "600519"]


async def test_e1_the_same_call_retried_replays(svc):
    """The same call (same id, same arguments, even spelled 100 vs 100.0) fills once."""
    tool = market_tools.get("execute_trade")
    first = await tool.call(_ctx(svc, "call_1"), {"code": "600519", "side": "buy", "quantity": 100})
    again = await tool.call(_ctx(svc, "call_1"), {"code": "600519", "side": "buy", "quantity": 100.0})
    assert not first["replayed"] and again["replayed"] and again["id"] == first["id"]
    assert len(await PaperBroker(svc.sessions(), MD).portfolio.trades("u1")) == 1


async def test_e1_broker_key_reused_for_another_order_is_an_error_naming_the_first(svc):
    broker = PaperBroker(svc.sessions(), MD)
    first = await broker.submit("u1", "600519", "buy", 100, key="k", request_hash="a")
    with pytest.raises(IdempotencyConflict) as err:
        await broker.submit("u1", "600036", "buy", 100, key="k", request_hash="b")
    assert f"#{first.trade['id']}" in str(err.value) and "600519" in str(err.value)
    assert len(await broker.portfolio.trades("u1")) == 1


args_st = st.fixed_dictionaries(
    {
        "code": st.sampled_from(["600519", "600036", "000001", "BTC/USDT"]),
        "side": st.sampled_from(["buy", "sell"]),
        "quantity": st.integers(1, 10_000),
    }
)


@given(a=args_st, b=args_st, call_a=st.text(max_size=12), call_b=st.text(max_size=12))
def test_execution_key_binds_session_tool_arguments_and_call_id(a, b, call_a, call_b):
    """Equal keys exactly when the session, tool, arguments and call id are equal;
    the key fits the column (191 characters)."""
    ka = execution_key("s1", "execute_trade", a, call_a)
    kb = execution_key("s1", "execute_trade", b, call_b)
    assert (ka == kb) == (a == b and call_a == call_b)
    assert ka != execution_key("s2", "execute_trade", a, call_a)
    assert ka != execution_key("s1", "other_tool", a, call_a)
    assert len(ka) <= 191
    floats = {**a, "quantity": float(a["quantity"])}
    assert execution_key("s1", "execute_trade", floats, call_a) == ka  # 100 and 100.0: one order


async def _mcp_trade(svc: MarketServices, args: dict) -> tuple[bool, dict | str]:
    # a new server each time: like a new `tapebot mcp` process after a reconnect or a restart
    server = build_mcp_server(market_tools, Deps(svc), allow_writes=True)
    async with Client(server) as client:
        result = await client.call_tool("execute_trade", args)
    text = result.content[0].text
    return result.is_error, (text if result.is_error else json.loads(text))


async def test_e1_mcp_client_key_holds_across_server_processes(svc):
    """Exactly once over MCP: a client retries with the same idempotency_key after a reconnect (a new
    server process); the trade happens once, and it is tagged source "mcp"."""
    args = {"code": "600519", "side": "buy", "quantity": 100, IDEMPOTENCY_ARG: "order-42"}
    err1, first = await _mcp_trade(svc, args)
    err2, retry = await _mcp_trade(svc, args)
    assert not err1 and not err2
    assert isinstance(first, dict) and isinstance(retry, dict)
    assert not first["replayed"] and retry["replayed"] and retry["id"] == first["id"]
    trades = await PaperBroker(svc.sessions(), MD).portfolio.trades("u1") + await PaperBroker(
        svc.sessions(), MD
    ).portfolio.trades("mcp")
    assert len(trades) == 1 and trades[0]["source"] == "mcp"


async def test_e1_mcp_key_reused_with_other_arguments_is_an_error_naming_the_first_order(svc):
    err1, first = await _mcp_trade(
        svc, {"code": "600519", "side": "buy", "quantity": 100, IDEMPOTENCY_ARG: "k1"}
    )
    assert not err1 and isinstance(first, dict)
    err2, msg = await _mcp_trade(
        svc, {"code": "600036", "side": "buy", "quantity": 100, IDEMPOTENCY_ARG: "k1"}
    )
    assert err2 and isinstance(msg, str)
    assert "k1" in msg and f"#{first['id']}" in msg and "600519" in msg
    assert len(await PaperBroker(svc.sessions(), MD).portfolio.trades("mcp")) == 1
