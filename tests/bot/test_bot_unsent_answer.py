"""A kill -9 between a turn storing its final answer and sending it loses nothing: the answer is
kept with the turn until the chat has been sent it, and the restart sends it — once, before what
the chat sends next. One older than the platform's `max_backlog_age_s` is dropped instead (the
chat has moved on). `tapebot run` as a real process, Telegram through the fake Bot API server
(the answer's send is held on its way, and the bot killed while it waits), on SQLite and — with
TAPEBOT_TEST_POSTGRES_URL — on PostgreSQL."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from tests.bot.bot_process import BotProcess
from tests.fakes.llm_server import Reply, ScriptedLLMServer
from tests.fakes.telegram_api import FakeBotAPI
from tests.pg import PG_URL, empty_schema

TOKEN = "123456:TEST-token-abcdef"
USER = 1001
FIRST, SECOND = "The answer is forty-two.", "Second answer: seven."

databases = pytest.mark.parametrize(
    "database",
    ["sqlite", pytest.param("postgres", marks=pytest.mark.skipif(not PG_URL, reason="no PostgreSQL server"))],
)


async def _unsent(url: str) -> list[Any]:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return list((await conn.execute(text("SELECT id FROM turns WHERE answer IS NOT NULL"))).all())
    finally:
        await engine.dispose()


async def _bot(
    tmp_path: Path, database: str, api: FakeBotAPI, llm: ScriptedLLMServer, **env: str
) -> tuple[BotProcess, str]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[telegram]\napi_base_url = "{api.base_url}"\nallowed_users = [{USER}]\n'
    )
    url = f"sqlite+aiosqlite:///{home / 'tapebot.db'}"
    base = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    base.update(
        TAPEBOT_HOME=str(home),
        TELEGRAM_BOT_TOKEN=TOKEN,
        OPENAI_API_KEY="sk-test-000000000000",
        OPENAI_BASE_URL=llm.openai_base_url,
        TAPEBOT_MEMORY__ENABLED="false",
        **env,
    )
    if database == "postgres":
        await empty_schema(PG_URL)
        url = base["TAPEBOT_DATABASE_URL"] = PG_URL
    return BotProcess(home, base), url


def _count(api: FakeBotAPI, text: str) -> int:
    return sum(text in t for t in api.texts(USER))


async def _ask_the_next(api: FakeBotAPI, llm: ScriptedLLMServer) -> None:
    llm.default = lambda body: Reply(SECOND)
    api.push_text(USER, "and the next?", user_id=USER)
    await api.wait_for(lambda: _count(api, "seven") == 1, timeout=45)


async def _kill_while_sending(api: FakeBotAPI, bot: BotProcess, released: asyncio.Event) -> None:
    """The user asks; the answer's send is held on its way to Telegram; the bot is killed -9 then."""
    held = asyncio.Event()

    async def until(_: Any) -> None:
        held.set()
        await released.wait()  # the killed bot's call is then refused: it never takes effect

    api.hold(
        "sendMessage", until, match=lambda p: "forty-two" in p.get("text", ""), then=(400, {"ok": False})
    )
    api.push_text(USER, "what is the answer?", user_id=USER)
    await asyncio.wait_for(held.wait(), 60)
    await bot.kill()
    assert _count(api, "forty-two") == 0


@databases
async def test_an_answer_cut_off_before_its_send_arrives_after_the_restart_once(tmp_path, database):
    api = FakeBotAPI(token=TOKEN)
    await api.serve()
    released = asyncio.Event()
    async with ScriptedLLMServer() as llm:
        llm.default = lambda body: Reply(FIRST)
        bot, url = await _bot(tmp_path, database, api, llm)
        await bot.start(api)
        try:
            await _kill_while_sending(api, bot, released)
            assert len(await _unsent(url)) == 1  # stored with its turn, not sent
            await bot.start(api)
            await api.wait_for(lambda: _count(api, "forty-two") == 1, timeout=45)
            await _ask_the_next(api, llm)
        finally:
            released.set()
            code = await bot.stop()
            await api.close()
    assert code == 0
    texts = api.texts(USER)
    assert _count(api, "forty-two") == 1, texts  # sent once, never again
    assert next(i for i, t in enumerate(texts) if "forty-two" in t) < next(
        i for i, t in enumerate(texts) if "seven" in t
    )
    assert await _unsent(url) == []


@databases
async def test_an_unsent_answer_older_than_the_backlog_age_is_dropped(tmp_path, database):
    api = FakeBotAPI(token=TOKEN)
    await api.serve()
    released = asyncio.Event()
    async with ScriptedLLMServer() as llm:
        llm.default = lambda body: Reply(FIRST)
        bot, url = await _bot(tmp_path, database, api, llm, TAPEBOT_TELEGRAM__MAX_BACKLOG_AGE_S="1")
        await bot.start(api)
        try:
            await _kill_while_sending(api, bot, released)
            await asyncio.sleep(1.5)  # the answer grows older than the backlog age while down
            await bot.start(api)
            await _ask_the_next(api, llm)
        finally:
            released.set()
            code = await bot.stop()
            await api.close()
    assert code == 0
    assert _count(api, "forty-two") == 0, api.texts(USER)
    assert await _unsent(url) == []
