"""One configuration truth: `config check`, `doctor`, `chat -m` and `run` — each the real command in a
subprocess — find the model key (and the bot token) the same way, whichever way it is supplied: the
real environment, `./.env`, `$TAPEBOT_HOME/.env` or config.toml. The real environment wins."""

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
KEY = "sk-test-truth-0123456789abcd"
TG_TOKEN = "123456:TEST-token-abcdef"
WAYS = ("environment", "cwd .env", "home .env", "config.toml")


@pytest.fixture
async def fakes():
    llm = ScriptedLLMServer()
    await llm.start()
    api = FakeBotAPI(token=TG_TOKEN)
    await api.serve()
    yield llm, api
    await api.close()
    await llm.close()


def _setup(tmp_path: Path, way: str, llm: ScriptedLLMServer, api: FakeBotAPI) -> tuple[Path, Path, dict]:
    """A home, a working folder and an environment holding the key and token only in `way`."""
    home, cwd = tmp_path / "home", tmp_path / "work"
    home.mkdir(mode=0o700)
    cwd.mkdir()
    toml = f'[telegram]\napi_base_url = "{api.base_url}"\nallowed_users = [1001]\n'
    toml += "[memory]\nenabled = false\n[scheduler]\nenabled = false\n"
    secrets = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": llm.openai_base_url, "TELEGRAM_BOT_TOKEN": TG_TOKEN}
    dotenv = "".join(f"{k}={v}\n" for k, v in secrets.items())
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_TOKEN", "_BASE_URL", "_MODEL")) and not k.startswith("TAPEBOT_")
    }
    env.update(TAPEBOT_HOME=str(home), PYTHONPATH=str(ROOT))
    if way == "environment":
        env.update(secrets)
    elif way == "cwd .env":
        (cwd / ".env").write_text(dotenv)
    elif way == "home .env":
        (home / ".env").write_text(dotenv)
    else:
        toml = (
            f'[[models]]\nid = "main"\nprovider = "openai"\nmodel = "gpt-4o-mini"\n'
            f'base_url = "{llm.openai_base_url}"\napi_key = "{KEY}"\n\n'
            + toml.replace("allowed_users", f'token = "{TG_TOKEN}"\nallowed_users')
        )
    (home / "config.toml").write_text(toml)
    for f in home.iterdir():
        f.chmod(0o600)
    return home, cwd, env


async def _cli(cwd: Path, env: dict, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tapebot", *args, cwd=cwd, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def _authorized(llm: ScriptedLLMServer) -> bool:
    return bool(llm.requests) and all(r.headers.get("Authorization") == f"Bearer {KEY}" for r in llm.requests)


@pytest.mark.parametrize("way", WAYS)
async def test_config_check_doctor_and_one_shot_chat_find_the_key(fakes, tmp_path, way):
    llm, api = fakes
    _home, cwd, env = _setup(tmp_path, way, llm, api)

    code, out, err = await _cli(cwd, env, "config", "check")
    assert code == 0, err
    assert "sk-…abcd" in out and KEY not in out + err

    llm.script(Reply("pong"))
    code, out, err = await _cli(cwd, env, "doctor")
    assert "✓ model main" in out, out + err
    assert "✓ telegram login" in out, out + err
    assert _authorized(llm)

    llm.requests.clear()
    llm.script(Reply("the answer"))
    code, out, err = await _cli(cwd, env, "chat", "-m", "hello")
    assert code == 0, err
    assert out.strip() == "the answer"
    assert _authorized(llm)


@pytest.mark.parametrize("way", WAYS)
async def test_run_finds_the_key_and_token(fakes, tmp_path, way):
    llm, api = fakes
    _home, cwd, env = _setup(tmp_path, way, llm, api)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tapebot", "run", cwd=cwd, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        # the bot is up when it long-polls the fake Telegram with the token it resolved
        await api.wait_for(lambda: api.calls_to("getUpdates") or proc.returncode is not None, timeout=90)
        assert proc.returncode is None, (await proc.communicate())[1].decode()
        llm.script(Reply("hi from the model"))
        api.push_text(1001, "hello", user_id=1001)
        await api.wait_for(lambda: any("hi from the model" in t for t in api.texts(1001)), timeout=60)
        assert _authorized(llm)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()


async def test_the_real_environment_wins_then_cwd_then_home(fakes, tmp_path):
    llm, api = fakes
    home, cwd, env = _setup(tmp_path, "environment", llm, api)
    (cwd / ".env").write_text("OPENAI_API_KEY=sk-from-cwd-dotenv-1111\nOPENAI_MODEL=cwd-model\n")
    (home / ".env").write_text("OPENAI_MODEL=home-model\nOPENAI_API_KEY=sk-from-home-dotenv-222\n")
    code, out, err = await _cli(cwd, env, "config", "check")
    assert code == 0, err
    assert "sk-…abcd" in out  # the environment's key, not a file's
    assert 'model = "cwd-model"' in out  # not in the environment: ./.env comes before home's
    env.pop("OPENAI_API_KEY")
    code, out, err = await _cli(cwd, env, "config", "check")
    assert "sk-…1111" in out, out + err
