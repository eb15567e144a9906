"""One configuration truth: every command resolves the environment, `./.env`, `$TAPEBOT_HOME/.env`
and config.toml the same way (the real environment wins, then ./.env). A model key supplied any
of the three ways works for `config check`, `doctor`, `chat -m` and `run` alike — real processes,
the model behind the scripted LLM server, Telegram behind the fake Bot API over HTTP."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.fakes.llm_server import Reply, ScriptedLLMServer
from tests.fakes.telegram_api import FakeBotAPI

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-truth-test-0000000000000"
TOKEN = "123456:TRUTH-token-abcdef"
WAYS = ("environment", "home .env", "working-directory .env")


def _base_env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_TOKEN")) and k not in ("OPENAI_BASE_URL", "TAPEBOT_HOME")
    }
    env.update(TAPEBOT_HOME=str(home), TAPEBOT_SCHEDULER__ENABLED="false", TAPEBOT_MEMORY__ENABLED="false")
    return env


def _supply(way: str, tmp_path: Path, home: Path, secrets: dict[str, str]) -> tuple[dict[str, str], Path]:
    """The environment and working directory of a command that gets `secrets` in `way`."""
    env = _base_env(home)
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    lines = "".join(f"{k}={v}\n" for k, v in secrets.items())
    if way == "environment":
        env.update(secrets)
    elif way == "home .env":
        (home / ".env").write_text(lines)
        (home / ".env").chmod(0o600)
    else:
        (cwd / ".env").write_text(lines)
    return env, cwd


async def _run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 120) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        *argv,
        env=env,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    return home


@pytest.mark.parametrize("way", WAYS)
async def test_config_check_doctor_and_chat_see_the_same_key(way, tmp_path, home):
    async with ScriptedLLMServer() as llm:
        llm.script(Reply("ok"), Reply("Hello from the key in the " + way + "."))
        env, cwd = _supply(
            way, tmp_path, home, {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": llm.openai_base_url}
        )
        code, out, err = await _run(["config", "check"], env, cwd)
        assert code == 0, err
        assert KEY not in out + err
        code, out, err = await _run(["doctor"], env, cwd)
        model = next(line for line in out.splitlines() if line[2:].startswith("model main"))
        assert model.startswith("✓"), out
        code, out, err = await _run(["chat", "-m", "hi"], env, cwd)
        assert code == 0, err
        assert out.strip() == f"Hello from the key in the {way}."
        assert "OPENAI_API_KEY" not in err


@pytest.mark.parametrize("way", WAYS)
async def test_run_sees_the_same_key_and_token(way, tmp_path, home):
    api = FakeBotAPI(token=TOKEN)
    await api.serve()
    try:
        async with ScriptedLLMServer() as llm:
            llm.script(Reply("Hello over HTTP."))
            (home / "config.toml").write_text(
                f'[telegram]\napi_base_url = "{api.base_url}"\nallowed_users = [1001]\n'
            )
            (home / "config.toml").chmod(0o600)
            env, cwd = _supply(
                way,
                tmp_path,
                home,
                {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": llm.openai_base_url, "TELEGRAM_BOT_TOKEN": TOKEN},
            )
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bot.cli",
                "run",
                env=env,
                cwd=cwd,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            try:
                await api.wait_for(lambda: api.calls_to("getUpdates"), timeout=60)
                api.push_text(1001, "hi", user_id=1001)
                await api.wait_for(lambda: any("Hello over HTTP." in t for t in api.texts(1001)), timeout=60)
                proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(proc.communicate(), 30)
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
            assert proc.returncode == 0
    finally:
        await api.close()


async def test_the_real_environment_wins_over_the_files(tmp_path, home):
    async with ScriptedLLMServer() as llm:
        llm.script(Reply("the environment's key"))
        (home / ".env").write_text("OPENAI_API_KEY=sk-from-the-file-000000000\n")
        (home / ".env").chmod(0o600)
        env = _base_env(home)
        env.update(OPENAI_API_KEY=KEY, OPENAI_BASE_URL=llm.openai_base_url)
        code, out, _ = await _run(["chat", "-m", "hi"], env, tmp_path)
        assert code == 0 and out.strip() == "the environment's key"
        assert llm.requests[0].headers.get("Authorization") == f"Bearer {KEY}"
