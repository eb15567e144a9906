"""Stops and crashes mid-turn with a real `tapebot run` process.

The process talks to the fake Telegram Bot API over HTTP and to the scripted LLM server through the
real OpenAI SDK, as in test_bot_run_process.py. SIGTERM stops taking new work and gives running
turns `[agent] shutdown_grace_s` to reach their next durable step; whatever did not is left open,
exactly as a crash leaves it. On the next start every interrupted turn is resumed without waiting
for the user, the chat is told what happened, and a tool cut off by the stop or the crash is
reported as "may or may not have completed", never run again."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.fakes.llm_server import Reply, ScriptedLLMServer, ToolCall
from tests.fakes.telegram_api import FakeBotAPI

# The running tool is a shell command, which runs only in the bubblewrap sandbox.
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) not installed")

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "123456:TEST-token-abcdef"
ALICE = 1001


class Bot:
    """`tapebot run` in a subprocess with one home, restartable."""

    def __init__(self, home: Path, api: FakeBotAPI, llm: ScriptedLLMServer, grace: float = 1.0):
        self.home, self.api, self.llm, self.grace = home, api, llm, grace
        self.proc: asyncio.subprocess.Process | None = None
        self.err = b""
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(
            f'[telegram]\napi_base_url = "{api.base_url}"\nallowed_users = [{ALICE}]\n'
        )

    async def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update(
            TAPEBOT_HOME=str(self.home),
            TELEGRAM_BOT_TOKEN=TOKEN,
            OPENAI_API_KEY="sk-test-000000000000",
            OPENAI_BASE_URL=self.llm.openai_base_url,
            TAPEBOT_SCHEDULER__ENABLED="false",
            TAPEBOT_MEMORY__ENABLED="false",
            TAPEBOT_AGENT__SHUTDOWN_GRACE_S=str(self.grace),
        )
        polls = len(self.api.calls_to("getUpdates"))
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "run", cwd=ROOT, env=env,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        await self.api.wait_for(lambda: len(self.api.calls_to("getUpdates")) > polls, timeout=60)

    async def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        _, self.err = await asyncio.wait_for(self.proc.communicate(), 60)
        code = self.proc.returncode
        self.proc = None
        assert code is not None
        return code

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        self.proc = None

    def turns(self) -> list[tuple[str, str]]:
        db = sqlite3.connect(self.home / "tapebot.db")
        try:
            return db.execute("SELECT status, payload FROM turns ORDER BY created_at").fetchall()
        finally:
            db.close()


def said(api: FakeBotAPI, needle: str) -> bool:
    return any(needle in t for t in api.texts(ALICE))


async def test_sigterm_while_the_model_thinks_answers_the_question_after_the_restart(tmp_path):
    api = FakeBotAPI(token=TOKEN)
    await api.serve()
    async with ScriptedLLMServer() as llm:
        bot = Bot(tmp_path / "home", api, llm)
        try:
            llm.script(Reply("too late", stall_before=60))
            await bot.start()
            api.push_text(ALICE, "what is 6 x 7?", user_id=ALICE)
            await api.wait_for(lambda: len(llm.requests) == 1, timeout=30)
            assert await bot.stop() == 0, bot.err.decode()[-3000:]
            # left open, as a crash leaves it: never stored as cancelled
            assert [s for s, _ in bot.turns()] == ["running"]

            llm.script(Reply("It is 42."))
            await bot.start()  # nobody writes anything: the question is answered anyway
            await api.wait_for(lambda: said(api, "It is 42."), timeout=30)
            assert said(api, "restarted")  # the chat is told why the answer came late
            resumed = llm.requests[-1].body["messages"]
            assert any("6 x 7" in str(m.get("content")) for m in resumed)
            assert [s for s, _ in bot.turns()] == ["completed"]
            assert await bot.stop() == 0
        finally:
            await bot.kill()
    await api.close()


async def approve_a_slow_command(api: FakeBotAPI, bot: Bot, llm: ScriptedLLMServer) -> Path:
    """ALICE asks; the model runs a shell command that appends to started.txt, then sleeps, then
    would write done.txt; ALICE approves it; returns the workspace once the command has started."""
    llm.script(
        Reply(
            tool_calls=[
                ToolCall(
                    "exec_command",
                    {"command": "echo run >> started.txt && sleep 30 && touch done.txt", "timeout": 120},
                )
            ]
        )
    )
    await bot.start()
    api.push_text(ALICE, "run the slow job", user_id=ALICE)
    card = await api.wait_for(
        lambda: next(
            (m for m in api.sent(ALICE) if (m.get("reply_markup") or {}).get("inline_keyboard")), None
        ),
        timeout=30,
    )
    buttons = [b for row in card["reply_markup"]["inline_keyboard"] for b in row]
    once = next(b for b in buttons if b["callback_data"].startswith("o:"))
    api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
    workspace = bot.home / "workspace"
    await api.wait_for(lambda: (workspace / "started.txt").exists(), timeout=30)
    return workspace


async def a_cut_off_tool_is_reported_and_not_run_again(tmp_path, sig: signal.Signals) -> None:
    api = FakeBotAPI(token=TOKEN)
    await api.serve()
    async with ScriptedLLMServer() as llm:
        bot = Bot(tmp_path / "home", api, llm)
        try:
            workspace = await approve_a_slow_command(api, bot, llm)
            code = await bot.stop(sig)
            if sig == signal.SIGTERM:
                assert code == 0, bot.err.decode()[-3000:]
            assert [s for s, _ in bot.turns()] == ["running"]

            asked = len(llm.requests)
            llm.script(Reply("I checked: the job did not finish."))
            await bot.start()
            await api.wait_for(lambda: said(api, "the job did not finish"), timeout=30)
            told = next(t for t in api.texts(ALICE) if t.startswith("🔄") and "exec_command" in t)
            assert "may or may not have completed" in told
            # the model learns it too, from the call's result
            seen = str(llm.requests[asked].body["messages"])
            assert "may or may not have completed" in seen
            assert (workspace / "started.txt").read_text().count("run") == 1  # never run again
            assert not (workspace / "done.txt").exists()
            assert await bot.stop() == 0
        finally:
            await bot.kill()
    await api.close()


@needs_bwrap
async def test_sigterm_during_a_running_tool_reports_it_after_the_restart(tmp_path):
    await a_cut_off_tool_is_reported_and_not_run_again(tmp_path, signal.SIGTERM)


@needs_bwrap
async def test_sigkill_during_a_running_tool_reports_it_after_the_restart(tmp_path):
    await a_cut_off_tool_is_reported_and_not_run_again(tmp_path, signal.SIGKILL)
