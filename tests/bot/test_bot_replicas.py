"""Two `tapebot run` replicas (two Apps, one database, one bot token) in polling mode: exactly one
polls and answers; when it stops, the other takes over and answers, with nothing lost. On a SQLite
file, and on PostgreSQL when TAPEBOT_TEST_POSTGRES_URL is set."""

from __future__ import annotations

import logging
import os

import pytest

from agent.providers.scripted import ScriptedClient, reply
from tests.bot.conftest import ALICE, Harness
from tests.fakes.telegram_api import FakeBotAPI

PG_URL = os.environ.get("TAPEBOT_TEST_POSTGRES_URL", "")


@pytest.fixture(params=["sqlite", "postgres"] if PG_URL else ["sqlite"])
async def env(request) -> dict[str, str]:
    # a short lease: the standby rechecks every 0.2 s
    env = {"TAPEBOT_TELEGRAM__REPLICA_LEASE_S": "0.6"}
    if request.param == "postgres":
        from sqlalchemy import text
        from sqlalchemy.ext.asyncio import create_async_engine

        engine = create_async_engine(PG_URL)
        async with engine.begin() as conn:
            await conn.execute(text("DROP SCHEMA public CASCADE"))
            await conn.execute(text("CREATE SCHEMA public"))
        await engine.dispose()
        env["TAPEBOT_DATABASE_URL"] = PG_URL
    return env


async def test_two_replicas_answer_each_message_once_and_hand_over(tmp_path, env, caplog):
    caplog.set_level(logging.INFO)
    api = FakeBotAPI(max_poll_wait=0.05)
    script = ScriptedClient()
    for i in range(3):
        script.add(reply(f"answer {i}"))
    first = Harness(tmp_path / "home", api, script, extra_env=env)
    second = Harness(tmp_path / "home", api, script, extra_env=env)
    try:
        a = await first.start()
        await api.wait_for(lambda: "this replica polls" in caplog.text)
        await second.start()
        await api.wait_for(lambda: f"standing by; replica {a.replica_id} polls" in caplog.text)
        for i in range(2):
            api.push_text(ALICE, f"question {i}", user_id=ALICE)
            await api.wait_for(lambda i=i: f"answer {i}" in api.texts(ALICE))
        assert len(api.calls_to("deleteWebhook")) == 1  # only the poller cleared the way

        await first.stop()  # releases the lease; the standby takes over
        api.push_text(ALICE, "question 2", user_id=ALICE)
        await api.wait_for(lambda: "answer 2" in api.texts(ALICE))
        assert caplog.text.count("this replica polls") == 2  # the first, then the second
        assert [t for t in api.texts(ALICE) if t.startswith("answer")] == ["answer 0", "answer 1", "answer 2"]
    finally:
        await first.stop()
        await second.stop()
