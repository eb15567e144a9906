"""Market tools: schemas, flags, approval gating, and each tool against real bundled data."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import jsonschema
import pytest
from markets_helpers import make_sessions

from agent.tools.registry import Deps, ToolContext, ToolOutput
from markets.data import MarketData
from markets.errors import NotFound, ServiceMissing
from markets.services import MarketServices
from markets.tools import market_tools

MD = MarketData()
MUTATING = {"update_portfolio", "execute_trade", "cancel_order", "manage_strategy", "manage_trader"}
BACKGROUND = {"screen_stocks", "run_backtest", "generate_ai_report", "generate_strategy_decision"}


@pytest.fixture
async def ctx(tmp_path):
    engine, sessions = await make_sessions(tmp_path)
    svc = MarketServices(
        data=MD,
        session_factory=sessions,
        results_dir=tmp_path / "results",
        clock=lambda: datetime(2026, 12, 6, 9, 0, tzinfo=UTC),
    )
    n = iter(range(1, 10_000))

    def make(**kw) -> ToolContext:
        return ToolContext(
            call_id=kw.pop("call_id", f"c{next(n)}"), session_id="s1", user_id="u1", deps=Deps(svc), **kw
        )

    yield make
    await engine.dispose()


async def call(ctx_factory, tool_name: str, **args):
    return await market_tools.get(tool_name).call(ctx_factory(), args)


def test_every_tool_has_a_valid_schema_and_description():
    names = {t.name for t in market_tools}
    assert {
        "search_stock_by_name",
        "analyze_stock",
        "get_market_overview",
        "get_market_history",
        "screen_stocks",
        "run_backtest",
        "portfolio",
        "update_portfolio",
        "generate_ai_report",
        "generate_strategy_decision",
        "manage_strategy",
        "manage_trader",
        "execute_trade",
        "get_positions",
        "get_balance",
        "get_market_price",
        "get_trade_history",
    } <= names
    for t in market_tools:
        jsonschema.Draft202012Validator.check_schema(t.spec.parameters)
        assert t.spec.parameters["type"] == "object" and t.spec.description and len(t.spec.summary) < 300
        assert "ctx" not in t.spec.parameters["properties"]
        json.dumps(t.spec.parameters)


def test_flags_mutating_tools_need_approval_and_reads_are_concurrency_safe():
    for t in market_tools:
        if t.name == "manage_alerts":  # writes only the user's own alerts: no approval, one at a time
            assert t.spec.side_effect == "mutating" and not t.spec.requires_approval, t.name
            assert not t.spec.concurrency_safe
            continue
        if t.name in MUTATING:
            # cancelling twice returns the first outcome: idempotent, still a change that needs approval
            effect = "idempotent" if t.name == "cancel_order" else "mutating"
            assert (
                t.spec.requires_approval and t.spec.side_effect == effect and not t.spec.concurrency_safe
            ), t.name
        else:
            assert not t.spec.requires_approval, t.name
        if t.name in BACKGROUND:
            assert t.spec.background, t.name
        elif t.name not in MUTATING:
            assert t.spec.concurrency_safe, t.name


async def test_missing_services_is_a_clear_error():
    with pytest.raises(ServiceMissing, match="MarketServices"):
        await market_tools.get("get_market_price").call(ToolContext(), {"code": "600519"})


async def test_search_and_price_state_as_of(ctx):
    r = await call(ctx, "search_stock_by_name", query="茅台")
    assert r["matches"][0]["symbol"] == "600519"
    p = await call(ctx, "get_market_price", code="GZMT")
    assert p["price"] == 1480.55 and p["as_of"] == "2025-09-03" and p["age_days"] == 459
    assert "as of 2025-09-03 (459 days old)" in p["note"]
    with pytest.raises(NotFound, match="did you mean"):
        await call(ctx, "get_market_price", code="贵州茅苔")


async def test_analyze_stock_returns_phase_and_chart(ctx):
    out = await call(ctx, "analyze_stock", code="600519")
    assert isinstance(out, ToolOutput)
    c = out.content
    assert c["as_of"] == "2025-09-03" and c["phase"]["label"] and c["phase"]["evidence"]
    assert c["refs"] == {"stock": "600519"} and "as of 2025-09-03" in c["source"]
    [att] = out.attachments
    assert att.path.is_file() and att.path.read_bytes()[:4] == b"\x89PNG"


async def test_market_history_and_overview(ctx):
    h = await call(ctx, "get_market_history", code="沪深300", limit=5)
    assert len(h["bars"]) == 5 and h["as_of"] == "2025-09-03"
    o = await call(ctx, "get_market_overview")
    assert (
        o["as_of"] == "2025-09-03"
        and o["breadth"]["advancers"] + o["breadth"]["decliners"] <= o["breadth"]["universe"]
    )
    assert o["strongest_industries"] and o["index"]["trend"] in ("up", "down", "sideways")


async def test_trade_replay_fills_once_and_portfolio_pnl(ctx):
    tool = market_tools.get("execute_trade")
    c = ctx(call_id="approved-call-7")
    first = await tool.call(c, {"code": "600519", "side": "buy", "quantity": 100})
    second = await tool.call(c, {"code": "600519", "side": "buy", "quantity": 100})  # replayed approval
    assert first["status"] == "filled" and not first["replayed"] and second["replayed"]
    pos = await call(ctx, "get_positions")
    assert [(p["symbol"], p["quantity"]) for p in pos["paper"]] == [("600519", 100)]
    view = await call(ctx, "portfolio", mode="view")
    assert view["as_of"]["cn"] == "2025-09-03" and view["paper"]["positions"][0]["pnl"] == pytest.approx(
        -first["fee"], abs=0.01
    )
    diag = await call(ctx, "portfolio", mode="diagnose")
    assert diag["paper"]["positions"][0]["health"]["rating"] in ("green", "yellow", "red")
    hist = await call(ctx, "get_trade_history")
    assert len(hist["trades"]) == 1 and any(r["kind"] == "diagnosis" for r in hist["records"])
    bal = await call(ctx, "get_balance", market="cn")
    assert bal["balances"][0]["cash"] < 1_000_000 and bal["venue"] == "paper"


async def test_update_portfolio_and_strategies(ctx):
    await call(ctx, "update_portfolio", action="set", code="000001", quantity=1000, cost=11.0)
    await call(ctx, "update_portfolio", action="cash", market="cn", cash=50_000)
    v = await call(ctx, "portfolio")
    rec = v["recorded"]
    assert rec["positions"][0]["symbol"] == "000001" and rec["totals"]["cn"]["cash"] == 50_000
    s = await call(
        ctx, "manage_strategy", action="create", name="激进", config={"max_positions": 5, "position_pct": 0.2}
    )
    assert s["refs"]["strategy"] == s["strategy"]["id"] and s["strategy"]["config"]["max_positions"] == 5
    await call(ctx, "manage_strategy", action="update", strategy="激进", config={"stop_pct": 0.05})
    t = await call(ctx, "manage_trader", action="create", name="lky", strategy="激进")
    started = await call(ctx, "manage_trader", action="start", trader="lky")
    assert started["trader"]["status"] == "running" and t["refs"]["strategy"] == s["strategy"]["id"]
    listing = await call(ctx, "get_strategies")
    assert listing["strategies"][0]["config"]["stop_pct"] == 0.05 and listing["traders"][0]["name"] == "lky"
    dup = await call(ctx, "manage_strategy", action="duplicate", strategy="激进", name="稳健")
    await call(ctx, "manage_strategy", action="activate", strategy=str(dup["strategy"]["id"]))
    await call(ctx, "manage_strategy", action="delete", strategy="激进")
    assert (await call(ctx, "manage_trader", action="list"))["traders"][0]["status"] == "stopped"


async def test_background_tools_screen_backtest_and_reports(ctx):
    progress = []

    async def prog(stage, detail="", percent=None):
        progress.append(stage)

    c = ctx(_progress=prog)
    s = await market_tools.get("screen_stocks").call(c, {"top": 5})
    assert len(s["picks"]) == 5 and s["as_of"] == "2025-09-03" and s["picks"][0]["reasons"]
    assert {"liquidity", "triggers", "done"} <= set(progress)
    b = await market_tools.get("run_backtest").call(
        ctx(), {"codes": ["600519", "300750", "000001", "601318"], "start": "2024-09-01"}
    )
    m = b.content["metrics"]
    assert b.content["start"] and "max_drawdown_pct" in m and "benchmark_return_pct" in m
    assert b.attachments and b.attachments[0].path.is_file()
    r = await call(ctx, "generate_ai_report", code="600519")
    assert (
        r["model"] is None
        and "No language model was used" in r["report"]
        and "as of 2025-09-03" in r["report"]
    )
    d = await call(ctx, "generate_strategy_decision", code="300750")
    assert d["decisions"][0]["action"] in ("consider_buy", "watch", "avoid")


async def test_ai_report_uses_the_model_when_configured(tmp_path):
    from agent.providers.scripted import ScriptedClient, reply

    model = ScriptedClient([reply("贵州茅台 is in a trading range (as of 2025-09-03).")])
    svc = MarketServices(data=MD, results_dir=tmp_path, model=model)
    r = await market_tools.get("generate_ai_report").call(ToolContext(deps=Deps(svc)), {"code": "600519"})
    assert r["model"] == "scripted-model" and "trading range" in r["report"]
    facts = model.requests[0].messages[0].text
    assert "FACTS" in facts and "2025-09-03" in facts
