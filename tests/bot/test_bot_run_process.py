"""`tapebot run` as an operator starts it: a real process, Telegram over HTTP through
`[telegram] api_base_url` (the fake Bot API server), the model through the real OpenAI SDK
(the scripted LLM server), and a clean exit on SIGTERM. `tapebot health` (the container's
HEALTHCHECK) is asked along the way, as a separate process, like the container engine does; and
with PostgreSQL, the database starts answering only after the bot has started and waited."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.fakes.late_tcp import LateProxy
from tests.fakes.llm_server import Reply, ScriptedLLMServer
from tests.fakes.telegram_api import FakeBotAPI
from tests.fakes.waits import eventually
from tests.pg import PG_URL, empty_schema

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "123456:TEST-token-abcdef"


def _env(home: Path, llm: ScriptedLLMServer, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        TAPEBOT_HOME=str(home),
        TELEGRAM_BOT_TOKEN=TOKEN,
        OPENAI_API_KEY="sk-test-000000000000",
        OPENAI_BASE_URL=llm.openai_base_url,
        TAPEBOT_SCHEDULER__ENABLED="false",
        **extra,
    )
    return env


def _home(tmp_path: Path, api: FakeBotAPI) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f"""
[telegram]
api_base_url = "{api.base_url}"
allowed_users = [1001]
"""
    )
    return home


async def _health(env: dict[str, str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "health",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode().strip()


async def _health_until(env: dict[str, str], pred, timeout: float = 30.0) -> tuple[int, str]:
    async def poll() -> tuple[int, str]:
        while True:
            rc, line = await _health(env)
            if pred(rc, line):
                return rc, line
            await asyncio.sleep(0.2)  # each look starts a `tapebot health` process: not in a tight loop

    return await asyncio.wait_for(poll(), timeout)


async def _start(env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "run",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def test_tapebot_run_answers_over_http_and_stops_on_sigterm(tmp_path):
    api = FakeBotAPI(token=TOKEN)
    await api.serve()
    async with ScriptedLLMServer() as llm:
        llm.script(Reply("Hello over HTTP."))
        env = _env(_home(tmp_path, api), llm)
        rc, line = await _health(env)
        assert rc == 1 and line.startswith("tapebot health: not running"), line
        proc = await _start(env)
        try:
            await api.wait_for(lambda: api.calls_to("getUpdates"), timeout=30)
            rc, line = await _health_until(env, lambda rc, _l: rc == 0)
            assert line.startswith("tapebot health: running"), line
            api.push_text(1001, "hi", user_id=1001)
            await api.wait_for(lambda: any("Hello over HTTP." in t for t in api.texts(1001)), timeout=30)
            proc.send_signal(signal.SIGTERM)
            out, err = await asyncio.wait_for(proc.communicate(), 30)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        await api.close()
        rc, line = await _health(env)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert TOKEN not in (out + err).decode()  # the token never reaches the logs
    assert rc == 1 and "not running" in line  # a stopped bot is not healthy


@pytest.mark.skipif(not PG_URL, reason="TAPEBOT_TEST_POSTGRES_URL is not set")
async def test_tapebot_run_waits_for_a_database_that_answers_late(tmp_path):
    """compose on an engine that ignores `condition: service_healthy`: the bot starts first, the
    database port refuses; the bot keeps retrying (unhealthy, saying why) and answers once the real
    PostgreSQL is reachable."""
    await empty_schema(PG_URL)
    real = make_url(PG_URL)
    proxy = LateProxy(real.host or "127.0.0.1", real.port or 5432)
    late_url = real.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    api = FakeBotAPI(token=TOKEN)
    await api.serve()
    async with ScriptedLLMServer() as llm:
        llm.script(Reply("Hello from PostgreSQL."))
        env = _env(_home(tmp_path, api), llm, TAPEBOT_DATABASE_URL=late_url)
        proc = await _start(env)
        logged: list[str] = []
        assert proc.stderr is not None
        stderr = proc.stderr

        async def read_log() -> None:
            while line := await stderr.readline():
                logged.append(line.decode(errors="replace"))

        reader = asyncio.create_task(read_log())
        try:
            refused = lambda: sum("not reachable yet" in line for line in logged)  # noqa: E731
            await eventually(lambda: proc.returncode is not None or refused() >= 2, timeout=30)
            assert proc.returncode is None, "".join(logged)[-2000:]
            rc, line = await _health(env)
            assert rc == 1 and line.endswith("waiting for the database"), line
            await proxy.open()
            rc, line = await _health_until(env, lambda rc, _l: rc == 0, timeout=60)
            api.push_text(1001, "hi", user_id=1001)
            await api.wait_for(
                lambda: any("Hello from PostgreSQL." in t for t in api.texts(1001)), timeout=30
            )
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)
            await reader
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            reader.cancel()
            await proxy.close()
        await api.close()
    assert proc.returncode == 0, "".join(logged)[-2000:]
    assert any("answered after" in line for line in logged)


async def test_sigterm_while_waiting_for_the_database_stops_at_once(tmp_path):
    """A container stopped while its database is still down: the wait ends on SIGTERM, exit 0,
    instead of running out its 120 s bound and failing."""
    proxy = LateProxy("127.0.0.1", 9)  # never opened: every connection is refused
    api = FakeBotAPI(token=TOKEN)
    await api.serve()
    async with ScriptedLLMServer() as llm:
        url = f"postgresql+asyncpg://tapebot:pw@127.0.0.1:{proxy.port}/tapebot"
        env = _env(_home(tmp_path, api), llm, TAPEBOT_DATABASE_URL=url)
        proc = await _start(env)
        assert proc.stderr is not None
        logged: list[str] = []
        try:
            while not any("not reachable yet" in line for line in logged):
                line = await asyncio.wait_for(proc.stderr.readline(), 30)
                assert line, "".join(logged)[-2000:]
                logged.append(line.decode(errors="replace"))
            rc, health = await _health(env)
            assert rc == 1 and health.endswith("waiting for the database"), health
            proc.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(proc.communicate(), 30)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            await proxy.close()
        await api.close()
        rc, health = await _health(env)
    assert proc.returncode == 0, (("".join(logged)) + err.decode())[-2000:]
    assert "pw@" not in "".join(logged)  # the password is masked in every retry line
    assert rc == 1 and "not running" in health
