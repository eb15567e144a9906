"""Two `tapebot run` replicas (two Apps, one database, one bot token) in polling mode: exactly one
polls and answers; when it stops, the other takes over and answers, with nothing lost. On a SQLite
file, and on PostgreSQL when TAPEBOT_TEST_POSTGRES_URL is set."""

from __future__ import annotations

import asyncio
import logging
import os
import socket

import aiohttp
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


class SlowEcho(ScriptedClient):
    """A model that takes a while and answers each turn's newest user message; it counts how many
    of its calls run at once (there is one chat, so two at once are two turns at once)."""

    def __init__(self) -> None:
        super().__init__()
        self.active = 0
        self.most = 0

    async def stream(self, request):
        self.requests.append(request)
        self.active += 1
        self.most = max(self.most, self.active)
        try:
            for _ in range(5):
                await asyncio.sleep(0.01)
            users = [m.text for m in request.messages if m.role == "user"]
            for chunk in reply(f"answer to [{users[-1]}]"):
                yield chunk
        finally:
            self.active -= 1


async def test_one_chats_turns_never_run_on_two_webhook_replicas_at_once(tmp_path):
    """Two replicas in webhook mode on PostgreSQL, one chat's messages posted to them in turn
    (a round-robin forwarder): never two turns at once, each message once in the history, one
    answer per turn. (Messages that arrive on the other replica while a turn runs are answered
    after that replica's own queue: across replicas the order is not yet the arrival order.)"""
    if not PG_URL:
        pytest.skip("no PostgreSQL server (set TAPEBOT_TEST_POSTGRES_URL)")
    env = await _fresh_postgres()
    api = FakeBotAPI(max_poll_wait=0.05)
    model = SlowEcho()
    replicas, urls = [], []
    for _ in range(2):
        port = _port()
        urls.append(f"http://127.0.0.1:{port}/telegram")
        extra = {
            **env,
            "TAPEBOT_TELEGRAM__MODE": "webhook",
            "TAPEBOT_TELEGRAM__WEBHOOK_URL": urls[-1],
            "TAPEBOT_TELEGRAM__WEBHOOK_PORT": str(port),
        }
        replicas.append(Harness(tmp_path / "home", api, model, extra_env=extra))
    try:
        for h in replicas:
            await h.start()
        secret = api.webhook["secret_token"]
        texts = [f"m{i}" for i in range(6)]
        async with aiohttp.ClientSession() as s:
            for i, text in enumerate(texts):
                update_id = api.push_text(ALICE, text, user_id=ALICE)
                update = next(u for u in api.updates if u["update_id"] == update_id)
                headers = {"X-Telegram-Bot-Api-Secret-Token": secret}
                async with s.post(urls[i % 2], json=update, headers=headers) as r:
                    assert r.status == 200
                api.updates.remove(update)

        def history() -> list[str]:
            last = model.requests[-1] if model.requests else None
            return [m.text for m in last.messages if m.role == "user"] if last else []

        await api.wait_for(lambda: sorted(history()) == texts and len(_answers(api)) == len(model.requests))
        assert model.most == 1, "two turns of one chat ran at once"
        assert len(history()) == len(texts)  # each message once in the history, none lost
    finally:
        for h in replicas:
            await h.stop()


def _answers(api: FakeBotAPI) -> list[str]:
    return [t for t in api.texts(ALICE) if t.startswith("answer to")]


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def _fresh_postgres() -> dict[str, str]:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(PG_URL)
    async with engine.begin() as conn:
        await conn.execute(text("DROP SCHEMA public CASCADE"))
        await conn.execute(text("CREATE SCHEMA public"))
    await engine.dispose()
    return {"TAPEBOT_DATABASE_URL": PG_URL}


class Gated(ScriptedClient):
    """A model whose answer waits until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def stream(self, request):
        self.requests.append(request)
        await self.gate.wait()
        for chunk in reply(f"answer #{len(self.requests)}"):
            yield chunk


async def test_a_replica_starting_leaves_a_live_replicas_running_turn_alone(tmp_path):
    """On PostgreSQL, a replica that starts while another runs a turn does not take that turn up
    as if it had been left by a crash: one model call, one answer, no "resumed" notice."""
    if not PG_URL:
        pytest.skip("no PostgreSQL server (set TAPEBOT_TEST_POSTGRES_URL)")
    env = await _fresh_postgres()
    api = FakeBotAPI(max_poll_wait=0.05)
    model = Gated()
    first = Harness(tmp_path / "home", api, model, extra_env=env)
    second = Harness(tmp_path / "home", api, model, extra_env=env)
    try:
        await first.start()
        api.push_text(ALICE, "a slow question", user_id=ALICE)
        await api.wait_for(lambda: len(model.requests) == 1)  # the turn runs on the first replica
        await second.start()  # its recovery runs now
        model.gate.set()
        await api.wait_for(lambda: any(t.startswith("answer #") for t in api.texts(ALICE)))
        await asyncio.sleep(0.3)  # room for a wrongly resumed second turn to show
        assert [t for t in api.texts(ALICE) if t.startswith("answer #")] == ["answer #1"]
        assert len(model.requests) == 1
        assert not any("I was restarted" in t for t in api.texts(ALICE))  # nobody was restarted
    finally:
        await second.stop()
        await first.stop()
