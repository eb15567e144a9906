"""`tapebot run` as an operator starts it: a real process, Telegram over HTTP through
`[telegram] api_base_url` (the fake Bot API server), the model through the real OpenAI SDK
(the scripted LLM server), and a clean exit on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from tests.fakes.llm_server import Reply, ScriptedLLMServer
from tests.fakes.telegram_api import FakeBotAPI

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "123456:TEST-token-abcdef"


async def test_tapebot_run_answers_over_http_and_stops_on_sigterm(tmp_path):
    api = FakeBotAPI(token=TOKEN)
    await api.serve()
    async with ScriptedLLMServer() as llm:
        llm.script(Reply("Hello over HTTP."))
        home = tmp_path / "home"
        home.mkdir()
        (home / "config.toml").write_text(
            f"""
[telegram]
api_base_url = "{api.base_url}"
allowed_users = [1001]
"""
        )
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update(
            TAPEBOT_HOME=str(home),
            TELEGRAM_BOT_TOKEN=TOKEN,
            OPENAI_API_KEY="sk-test-000000000000",
            OPENAI_BASE_URL=llm.openai_base_url,
            TAPEBOT_SCHEDULER__ENABLED="false",
        )
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot.cli",
            "run",
            cwd=ROOT,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await api.wait_for(lambda: api.calls_to("getUpdates"), timeout=30)
            api.push_text(1001, "hi", user_id=1001)
            await api.wait_for(lambda: any("Hello over HTTP." in t for t in api.texts(1001)), timeout=30)
            proc.send_signal(signal.SIGTERM)
            out, err = await asyncio.wait_for(proc.communicate(), 30)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        await api.close()
    assert proc.returncode == 0, err.decode()[-2000:]
    assert TOKEN not in (out + err).decode()  # the token never reaches the logs
