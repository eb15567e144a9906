"""The core investing conversation through Telegram (fake Bot API) with the real toolkit:
"analyze 600519" → chart + phase; "buy 100 shares" → approval → exactly one fill;
"how is my portfolio" → P&L as of the last bar."""

from __future__ import annotations

import asyncio
import json

from agent.providers.scripted import reply
from tests.bot.conftest import ALICE, ON_BOTH_DATABASES
from tests.fakes.telegram_api import button_of


def buttons_of(msg):
    return [b for row in (msg.get("reply_markup") or {}).get("inline_keyboard", []) for b in row]


def last_tool_json(req) -> dict:
    assert req.messages[-1].role == "tool", [(m.role, m.text[:60]) for m in req.messages]
    return json.loads(req.messages[-1].tool_results[0].content)


@ON_BOTH_DATABASES
async def test_analyze_buy_portfolio_over_telegram(harness):
    seen: dict = {}

    def after_analysis(req):
        data = last_tool_json(req)
        seen["analysis"] = data
        return reply(f"600519 is in phase {data['phase']['phase']} ({data['phase']['label']}).")

    def after_fill(req):
        seen["fill"] = last_tool_json(req)
        return reply("Bought 100 shares of 600519 (paper).")

    def after_portfolio(req):
        seen["portfolio"] = last_tool_json(req)
        return reply("Your portfolio is up to date.")

    harness.script.add(
        reply(tool_calls=[("analyze_stock", {"code": "600519"})]),
        after_analysis,
        reply(tool_calls=[("execute_trade", {"code": "600519", "side": "buy", "quantity": 100})]),
        after_fill,
        reply(tool_calls=[("portfolio", {"mode": "view"})]),
        after_portfolio,
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "analyze 600519", user_id=ALICE)
    await api.wait_for(lambda: any("is in phase" in t for t in api.texts(ALICE)), timeout=20)
    assert api.calls_to("sendPhoto"), "the chart is delivered as a photo"
    assert "2025-09-03" in json.dumps(seen["analysis"], ensure_ascii=False)

    api.push_text(ALICE, "buy 100 shares", user_id=ALICE)
    card = await api.wait_for(lambda: next((m for m in api.sent(ALICE) if buttons_of(m)), None), timeout=10)
    assert "execute_trade" in card["text"]
    once = button_of(card, "o")
    api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
    api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)  # double tap
    await api.wait_for(lambda: any("Bought 100 shares" in t for t in api.texts(ALICE)), timeout=10)
    await asyncio.sleep(0.2)  # absence: time for the double tap to fill a second time

    api.push_text(ALICE, "how is my portfolio", user_id=ALICE)
    await api.wait_for(lambda: any("portfolio is up to date" in t for t in api.texts(ALICE)), timeout=10)
    pf = json.dumps(seen["portfolio"], ensure_ascii=False)
    assert "600519" in pf and "2025-09-03" in pf
    positions = seen["portfolio"]["paper"]["positions"]  # a paper trade: the paper book
    held = [p for p in positions if "600519" in p.get("symbol", "")]
    assert len(held) == 1 and held[0]["quantity"] == 100  # exactly one fill despite the double tap


async def _fail_trade_inserts(url: str) -> None:
    """The database refuses every new trade, as PostgreSQL refused a too-long column: a real
    driver error, its text quoting the SQL and its parameters, raised on the real write path."""
    from sqlalchemy import text

    from memory.db import create_engine

    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            if engine.dialect.name == "sqlite":
                await conn.execute(
                    text(
                        "CREATE TRIGGER refuse_trades BEFORE INSERT ON market_trades BEGIN "
                        "SELECT RAISE(ABORT, 'value too long for type character varying(64)'); END"
                    )
                )
            else:
                await conn.execute(
                    text(
                        "CREATE FUNCTION refuse_trades() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION "
                        "'value too long for type character varying(64)'; END $$ LANGUAGE plpgsql"
                    )
                )
                await conn.execute(
                    text(
                        "CREATE TRIGGER refuse_trades BEFORE INSERT ON market_trades "
                        "FOR EACH ROW EXECUTE FUNCTION refuse_trades()"
                    )
                )
    finally:
        await engine.dispose()


@ON_BOTH_DATABASES
async def test_a_database_failure_reaches_the_chat_as_a_sentence_not_as_sql(harness, caplog):
    """The approved trade's write fails in the database. The chat gets a plain sentence in its
    language; the SQL, its parameters and the driver's words stay in the log. The model is
    scripted to repeat its tool result word for word (the worst a model can do with it)."""
    import logging

    harness.script.add(
        reply(tool_calls=[("execute_trade", {"code": "600519", "side": "buy", "quantity": 100})]),
        lambda req: reply("Tool said: " + req.messages[-1].tool_results[0].content),
    )
    app = await harness.start()
    await _fail_trade_inserts(app.settings.db_url)
    api = harness.api
    caplog.set_level(logging.ERROR)
    api.push_text(ALICE, "buy 100 shares", user_id=ALICE, language_code="zh-hans")
    card = await api.wait_for(lambda: next((m for m in api.sent(ALICE) if buttons_of(m)), None), timeout=10)
    once = button_of(card, "o")
    api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
    await api.wait_for(lambda: any("Tool said" in t for t in api.texts(ALICE)), timeout=10)
    await api.wait_for(lambda: any("机器人的数据库出错" in t for t in api.texts(ALICE)))  # its last edit

    chat = "\n".join(api.texts(ALICE))
    for raw in ("INSERT", "market_trades", "[SQL", "parameters", "varying", "sqlalchemy", "600519', 'buy"):
        assert raw not in chat, f"{raw!r} reached the chat:\n{chat}"
    assert "机器人的数据库出错" in chat, chat  # the progress line, in the chat's language
    assert "did not complete: tapebot's database failed" in chat  # the model's words
    logged = caplog.text  # as formatted for the log: message and traceback
    assert "execute_trade failed on the database" in logged
    assert "INSERT INTO market_trades" in logged and "value too long" in logged


def test_storage_failures_are_told_apart_from_a_tool_s_own_errors():
    import sqlite3

    from sqlalchemy.exc import DataError, IntegrityError

    from agent.errors import StorageError, ToolFailed, is_storage_failure

    assert is_storage_failure(IntegrityError("INSERT ...", {}, Exception("x")))
    assert is_storage_failure(DataError("INSERT ...", {}, Exception("x")))
    assert is_storage_failure(sqlite3.OperationalError("disk I/O error"))
    assert is_storage_failure(StorageError("database error: locked"))
    assert not is_storage_failure(ValueError("unknown symbol 999999"))
    assert not is_storage_failure(ToolFailed("insufficient cash"))
