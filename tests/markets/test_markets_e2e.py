"""End-to-end through the real agent runtime with a scripted model: "analyze 600519" → chart and
phase; "buy 100 shares" → approval → exactly one fill (a second tap or a replay changes nothing);
"how is my portfolio" → P&L as of the last bar. Also the trader runner, snapshots and the migration."""

from __future__ import annotations

import json

import pytest
from markets_helpers import make_sessions

from agent import events as ev
from agent.approval import Requester
from agent.errors import ApprovalError
from agent.inmemory import InMemoryStore
from agent.providers.scripted import ScriptedClient, reply
from agent.runtime import AgentRuntime, TurnRequest
from agent.tools.registry import Deps
from markets.broker import PaperBroker
from markets.data import MarketData
from markets.services import MarketServices
from markets.snapshots import concerns_account, dynamic_snapshot, references_from
from markets.strategies import StrategyStore, run_trader_once
from markets.tools import market_tools
from tests.pg import fresh_postgres

MD = MarketData()


async def collect(it):
    return [e async for e in it]


@pytest.fixture(params=["sqlite", "postgresql"])
async def world(request, tmp_path):
    """The toolkit on a real SQLite file, and on PostgreSQL when a server is configured (lengths
    and types hold there: SQLite ignores them)."""
    url = await fresh_postgres() if request.param == "postgresql" else None
    engine, sessions = await make_sessions(tmp_path, url)
    svc = MarketServices(data=MD, session_factory=sessions, results_dir=tmp_path / "results")
    yield svc
    await engine.dispose()


async def test_analyze_buy_approve_once_portfolio(world, tmp_path):
    model = ScriptedClient(
        [
            reply(tool_calls=[("analyze_stock", {"code": "600519"})]),
            lambda req: reply(
                "600519 analysed: " + json.loads(req.messages[-1].tool_results[0].content)["phase"]["label"]
            ),
            reply(tool_calls=[("execute_trade", {"code": "600519", "side": "buy", "quantity": 100})]),
            reply("Bought 100 shares."),
            reply(tool_calls=[("portfolio", {"mode": "view"})]),
            lambda req: reply(
                "P&L "
                + str(json.loads(req.messages[-1].tool_results[0].content)["paper"]["positions"][0]["pnl"])
                + " as of "
                + json.loads(req.messages[-1].tool_results[0].content)["as_of"]["cn"]
            ),
        ]
    )
    rt = AgentRuntime(
        model_for=lambda _id: model,
        tools=market_tools,
        store=InMemoryStore(),
        deps=Deps(world),
        workspace=tmp_path,
        results_dir=tmp_path / "spill",
    )
    who = Requester("u1", "tg:1", ("u1",))

    events = await collect(rt.run(TurnRequest(session_id="s1", text="analyze 600519", who=who)))
    result = next(e for e in events if isinstance(e, ev.ToolResult))
    assert result.attachments and result.attachments[0].path.read_bytes()[:4] == b"\x89PNG"
    assert events[-1].text.startswith("600519 analysed: ") and len(events[-1].text) > len("600519 analysed: ")

    events = await collect(rt.run(TurnRequest(session_id="s1", text="buy 100 shares", who=who)))
    approval = next(e for e in events if isinstance(e, ev.ApprovalRequired))
    assert events[-1].status == "suspended"
    assert await PaperBroker(world.session_factory, MD).portfolio.trades("u1") == []  # nothing before the tap
    await rt.decide(approval.approval_id, "u1", "once")
    with pytest.raises(ApprovalError):
        await rt.decide(approval.approval_id, "u1", "once")  # a second tap
    events = await collect(rt.resume(approval.turn_id))
    assert events[-1].text == "Bought 100 shares."
    await collect(rt.resume(approval.turn_id))  # a replayed resume executes nothing new
    trades = await PaperBroker(world.session_factory, MD).portfolio.trades("u1")
    assert [(t["symbol"], t["quantity"], t["status"]) for t in trades] == [("600519", 100, "filled")]

    events = await collect(rt.run(TurnRequest(session_id="s1", text="how is my portfolio", who=who)))
    fee = trades[0]["fee"]
    assert events[-1].text == f"P&L {-fee} as of 2025-09-03"


async def test_trader_runs_once_per_day(world):
    store = StrategyStore(world.session_factory)
    broker = PaperBroker(world.session_factory, MD)
    await store.create(
        "u1",
        "wy",
        {
            "universe": ["601939", "600519", "000001"],
            "trend_filter": False,
            "min_amount": 0,
            "entry": ["spring", "sos", "lps"],
        },
    )
    await store.create_trader("u1", "bot", "wy")
    skipped = await run_trader_once(store, broker, MD, "u1", "bot")
    assert "skipped" in skipped
    await store.update_trader("u1", "bot", status="running")
    first = await run_trader_once(store, broker, MD, "u1", "bot")
    again = await run_trader_once(store, broker, MD, "u1", "bot")  # double-fired job
    fills = [o for o in first["orders"] if o["status"] == "filled"]
    assert fills, first  # 601939 fires an entry trigger on the last bar of the dataset
    assert not [o for o in again["orders"] if o["status"] == "filled" and not o["replayed"]]
    trades = await broker.portfolio.trades("u1")
    assert len([t for t in trades if t["status"] == "filled"]) == len(fills)
    # the wall-clock session the keys use, not the frozen bar date (first["as_of"])
    assert (await store.traders("u1"))[0]["last_run_on"] == first["session"] == str(broker.session_day("cn"))
    assert first["as_of"] == "2025-09-03"


async def test_dynamic_snapshot_and_references(world):
    await PaperBroker(world.session_factory, MD).portfolio.set_holding("u1", "600519", 100, 1400)
    assert (
        concerns_account("我的持仓怎么样")
        and concerns_account("how is my portfolio")
        and not concerns_account("hello")
    )
    snap = await dynamic_snapshot(world, "u1", "how is my portfolio")
    assert "as of 2025-09-03" in snap and "贵州茅台(600519)" in snap
    assert await dynamic_snapshot(world, "u1", "tell me a joke") == ""
    assert references_from('{"refs": {"stock": "600519"}}') == {"stock": "600519"}


def test_migration_matches_the_orm_tables(tmp_path):
    import importlib.util
    from pathlib import Path

    import sqlalchemy as sa
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    import markets.models
    from memory.base import Base

    def load(name: str):
        path = Path(markets.models.__file__).parents[1] / f"memory/migrations/versions/{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    mod, paper = load("0003_markets"), load("0009_paper_book")
    request_hash = load("0010_order_request_hash")
    alerts = load("0013_market_alerts")
    assert mod.revision == "0003_markets" and mod.down_revision == "0002_memory"
    assert paper.revision == "0009_paper_book"
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'm.db'}")
    with engine.begin() as conn:
        with Operations.context(MigrationContext.configure(conn)):
            mod.upgrade()
            # a holding recorded before 0009 (no paper trade) moves to market_holdings; a paper one stays
            conn.execute(
                sa.text(
                    "INSERT INTO market_positions (user_id, market, symbol, name, quantity, avg_cost, "
                    "high_since_entry, note, updated_at) VALUES ('u', 'cn', '600519', '', 100, 1, 1, '', "
                    "'2026-01-01'), ('u', 'cn', '000001', '', 200, 1, 1, '', '2026-01-01')"
                )
            )
            conn.execute(
                sa.text(
                    "INSERT INTO market_trades (idempotency_key, user_id, market, symbol, side, quantity, fee, "
                    "tax, status, venue, source, reason, external_id, created_at, updated_at) VALUES ('k', 'u', "
                    "'cn', '000001', 'buy', 200, 5, 0, 'filled', 'paper', 'chat', '', '', '2026-01-01', "
                    "'2026-01-01')"
                )
            )
            paper.upgrade()
            request_hash.upgrade()  # market_trades.request_hash
            alerts.upgrade()  # market_alerts, market_alert_triggers, market_watchlist
        moved = conn.execute(sa.text("SELECT symbol FROM market_holdings")).scalars().all()
        kept = conn.execute(sa.text("SELECT symbol FROM market_positions")).scalars().all()
        assert moved == ["600519"] and kept == ["000001"]
        insp = sa.inspect(conn)
        for table in [t for t in Base.metadata.sorted_tables if t.name.startswith("market_")]:
            cols = {c["name"] for c in insp.get_columns(table.name)}
            assert cols == {c.name for c in table.columns}, table.name
        uniques = {u["name"] for u in insp.get_unique_constraints("market_trades")}
        assert "uq_market_trades_idempotency_key" in uniques
        uniques = {u["name"] for u in insp.get_unique_constraints("market_alert_triggers")}
        assert "uq_market_alert_triggers_alert_id" in uniques  # one firing per alert, symbol and bar
        with Operations.context(MigrationContext.configure(conn)):
            alerts.downgrade()
            request_hash.downgrade()
            paper.downgrade()
            assert sorted(conn.execute(sa.text("SELECT symbol FROM market_positions")).scalars()) == [
                "000001",
                "600519",
            ]
            mod.downgrade()
        assert not [n for n in sa.inspect(conn).get_table_names() if n.startswith("market_")]


async def test_daily_job_runs_every_running_trader_once(world):
    from markets.strategies import run_all_traders

    store = StrategyStore(world.session_factory)
    cfg = {
        "universe": ["601939", "600519"],
        "trend_filter": False,
        "min_amount": 0,
        "entry": ["spring", "sos", "lps"],
    }
    for user in ("u1", "u2"):
        await store.create(user, "wy", cfg)
        await store.create_trader(user, "bot", "wy")
        await store.update_trader(user, "bot", status="running")
    await store.create_trader("u1", "idle", "wy")  # stopped: not run
    first = await run_all_traders(world)
    again = await run_all_traders(world)  # a double-fired job trades nothing new
    assert len(first) == 2 and all("error" not in r for r in first)
    broker = PaperBroker(world.session_factory, MD)
    for user in ("u1", "u2"):
        fills = [t for t in await broker.portfolio.trades(user) if t["status"] == "filled"]
        assert fills and len(fills) == len({t["symbol"] for t in fills})
    assert not [
        o for r in again for o in r.get("orders", []) if o["status"] == "filled" and not o["replayed"]
    ]
