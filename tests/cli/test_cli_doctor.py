"""`tapebot doctor` against the project's fakes: the scripted LLM server, the fake Telegram Bot API
and the fake Discord REST API, reached over HTTP exactly as the real services would be."""

from __future__ import annotations

import asyncio
import io
import os
import sys
from datetime import date
from pathlib import Path

import pytest

from bot.cli import CliContext
from bot.cli import doctor as cli_doctor
from bot.doctor import Check, check_calendar, check_file_modes, check_sandbox, exit_code, render
from config.loader import load_settings
from tests.fakes.discord_fake import FakeDiscord
from tests.fakes.llm_server import Failure, Reply, ScriptedLLMServer
from tests.fakes.telegram_api import FakeBotAPI

ROOT = Path(__file__).resolve().parents[2]
TG_TOKEN = "123456:TEST-token-abcdef"
DC_TOKEN = "discord-token-0123456789"
KEY = "sk-test-doctor-000000000000"
TODAY = date(2025, 6, 2)  # inside the bundled calendar and 30 days beyond


@pytest.fixture
async def fakes():
    llm = ScriptedLLMServer()
    await llm.start()
    api = FakeBotAPI(token=TG_TOKEN)
    await api.serve()
    dc = FakeDiscord()
    dc.token = DC_TOKEN
    await dc.start()
    yield llm, api, dc
    await dc.close()
    await api.close()
    await llm.close()


def _home(tmp_path: Path, api: FakeBotAPI, dc: FakeDiscord, extra: str = "") -> Path:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(
        f"""
[telegram]
api_base_url = "{api.base_url}"
allowed_users = [1001]

[discord]
api_base_url = "http://127.0.0.1:{dc.port}/api/v10"
allowed_users = [2002]
{extra}
"""
    )
    (home / "config.toml").chmod(0o600)
    return home


def _env(home: Path, llm: ScriptedLLMServer, **more: str) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", ""), "TAPEBOT_HOME": str(home)}
    env.update(
        TELEGRAM_BOT_TOKEN=TG_TOKEN,
        DISCORD_BOT_TOKEN=DC_TOKEN,
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL=llm.openai_base_url,
    )
    env.update(more)
    return env


async def _doctor(env: dict[str, str], today: date = TODAY) -> tuple[int, str]:
    out = io.StringIO()
    ctx = CliContext(environ=env, stdout=out, stderr=out)
    # the doctor runs its own event loop, as on the command line; the fakes serve on this one
    code = await asyncio.to_thread(cli_doctor.main, ctx, today=today)
    return code, out.getvalue()


def _line(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if line[2:].startswith(f"{name}:"))


async def test_all_good_against_the_fakes(fakes, tmp_path):
    llm, api, dc = fakes
    llm.script(Reply("ok"))
    home = _home(tmp_path, api, dc)
    code, out = await _doctor(_env(home, llm))
    assert code == 0, out
    assert _line(out, "model main").startswith("✓")
    assert "@tapebot_test_bot" in _line(out, "telegram login")
    assert _line(out, "telegram webhook").startswith("✓ telegram webhook: none (polling)")
    assert _line(out, "discord login").startswith("✓")
    assert _line(out, "discord intents").startswith("✓")
    assert "does not exist yet" in _line(out, "database")
    assert _line(out, "trading calendar").startswith("✓")
    assert "A-shares as of 2025-09-03" in _line(out, "market data")
    assert "BTC/ETH as of 2025-07-13" in _line(out, "market data")
    assert _line(out, "file modes").startswith("✓")
    assert out.rstrip().splitlines()[-1].endswith("0 failed")
    # one tiny call reached the model, with the key; getMe and getWebhookInfo reached Telegram
    assert len(llm.requests) == 1 and llm.requests[0].body["max_tokens"] == 16
    assert llm.requests[0].headers.get("Authorization") == f"Bearer {KEY}"
    assert api.calls_to("getMe") and api.calls_to("getWebhookInfo")
    for secret in (TG_TOKEN, DC_TOKEN, KEY):
        assert secret not in out


async def test_each_failure_is_a_cross_with_its_fix(fakes, tmp_path):
    llm, api, dc = fakes
    llm.script(Failure(401))
    home = _home(tmp_path, api, dc, extra="message_content_intent = true")
    (home / "config.toml").chmod(0o644)
    home.chmod(0o755)
    env = _env(
        home, llm, TELEGRAM_BOT_TOKEN="123456:WRONG-token-zzzzzz", DISCORD_BOT_TOKEN="wrong-discord-token-xx"
    )
    code, out = await _doctor(env, today=date(2027, 3, 1))
    assert code == 1
    lines = out.splitlines()

    def fix_after(name: str) -> str:
        i = lines.index(_line(out, name))
        assert lines[i].startswith("✗"), lines[i]
        assert lines[i + 1].startswith("    fix: "), lines[i + 1]
        return lines[i + 1]

    assert "OPENAI_API_KEY" in fix_after("model main")
    assert "@BotFather" in fix_after("telegram login")
    assert "Reset Token" in fix_after("discord login")
    assert "update-calendar" in fix_after("trading calendar")
    assert "chmod 700" in fix_after("file modes")
    for secret in ("WRONG-token", "wrong-discord-token"):
        assert secret not in out


async def test_discord_intent_off_in_the_portal(fakes, tmp_path):
    llm, api, dc = fakes
    llm.script(Reply("ok"))
    home = _home(tmp_path, api, dc, extra="message_content_intent = true")
    code, out = await _doctor(_env(home, llm))
    assert code == 1
    assert _line(out, "discord intents").startswith("✗")
    assert "Message Content Intent" in out
    dc.app_flags = 1 << 19  # switched on in the portal (GATEWAY_MESSAGE_CONTENT_LIMITED)
    llm.script(Reply("ok"))
    code, out = await _doctor(_env(home, llm))
    assert code == 0, out
    assert _line(out, "discord intents").startswith("✓ discord intents: Message Content intent on")


async def test_webhook_error_reported_by_telegram(fakes, tmp_path):
    llm, api, dc = fakes
    llm.script(Reply("ok"))
    home = _home(tmp_path, api, dc)
    config = (
        (home / "config.toml")
        .read_text()
        .replace(
            "allowed_users = [1001]",
            'allowed_users = [1001]\nmode = "webhook"\nwebhook_url = "https://bot.example/tg"',
            1,
        )
    )
    (home / "config.toml").write_text(config)
    api.webhook = {"url": "https://bot.example/tg"}
    original = api._m_getWebhookInfo

    async def with_error(p, f):
        status, body = await original(p, f)
        body["result"]["last_error_message"] = "Connection refused"
        return status, body

    api._m_getWebhookInfo = with_error
    code, out = await _doctor(_env(home, llm, TELEGRAM_WEBHOOK_SECRET="s3cret-webhook-token"))
    assert code == 1
    assert _line(out, "telegram webhook").startswith(
        "✗ telegram webhook: Telegram reports: Connection refused"
    )


async def test_database_migrations_current_and_behind(fakes, tmp_path):
    from memory.db import upgrade

    llm, api, dc = fakes
    home = _home(tmp_path, api, dc)
    url = f"sqlite+aiosqlite:///{home / 'tapebot.db'}"
    await upgrade(url, "0002_memory")
    llm.script(Reply("ok"))
    code, out = await _doctor(_env(home, llm))
    assert code == 0, out  # behind is fine: the next start migrates
    assert _line(out, "database").startswith("! database: at 0002_memory")
    assert "tapebot db backup" in out
    await upgrade(url)
    llm.script(Reply("ok"))
    code, out = await _doctor(_env(home, llm))
    assert _line(out, "database").startswith("✓ database: migrations current")


async def test_a_broken_config_is_one_failed_line(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[agent]\nmodle = 'x'\n")
    code, out = await _doctor({"TAPEBOT_HOME": str(home)})
    assert code == 1
    assert out.startswith("✗ config:") and "modle" in out


def test_calendar_window():
    assert check_calendar(date(2025, 6, 2)).status == "ok"
    near_end = check_calendar(date(2026, 12, 15))
    assert near_end.status == "warn" and "2026-12-31" in near_end.detail
    assert check_calendar(date(2027, 1, 5)).status == "fail"


def test_file_modes(tmp_path):
    home = tmp_path / "home"
    settings = load_settings(home, {}, require_model=False)
    assert "does not exist yet" in check_file_modes(settings).detail
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text("")
    (home / "config.toml").chmod(0o600)
    assert check_file_modes(settings).status == "ok"
    (home / "tapebot.db").write_text("")
    (home / "tapebot.db").chmod(0o644)
    bad = check_file_modes(settings)
    assert bad.status == "fail" and "tapebot.db" in bad.detail and "chmod 600" in bad.fix
    home.chmod(0o755)
    assert str(home) in check_file_modes(settings).detail


def test_sandbox(tmp_path):
    from agent.tools.sandbox import SandboxStatus

    settings = load_settings(tmp_path / "home", {}, require_model=False)
    assert check_sandbox(settings, lambda policy: SandboxStatus(True, True)).status == "ok"
    missing = check_sandbox(
        settings, lambda policy: SandboxStatus(False, False, "bubblewrap (`bwrap`) is not installed")
    )
    assert missing.status == "warn" and "exec_command is refused" in missing.detail
    assert "apt-get install bubblewrap" in missing.fix
    opted_out = check_sandbox(settings, lambda policy: SandboxStatus(False, True, "no bwrap"))
    assert opted_out.status == "warn" and "WITHOUT a sandbox" in opted_out.detail


def test_calendar_from_the_data_folder(tmp_path):
    import json

    days = [f"2027-01-{d:02d}" for d in (4, 5, 6, 7, 8, 11, 12)] + [
        f"2027-02-{d:02d}" for d in (1, 2, 3, 4, 5, 8, 9, 10)
    ]
    (tmp_path / "cn_trade_calendar.json").write_text(json.dumps(days))
    check = check_calendar(date(2027, 1, 5), tmp_path)
    assert check.status == "ok" and "cn_trade_calendar.json" in check.detail


def test_render_and_exit_code():
    checks = [Check("a", "ok", "fine"), Check("b", "warn", "hm", "do x"), Check("c", "fail", "no", "do y")]
    text = render(checks)
    assert text.splitlines() == [
        "✓ a: fine",
        "! b: hm",
        "    fix: do x",
        "✗ c: no",
        "    fix: do y",
        "3 checks: 1 ok, 1 to look at, 1 failed",
    ]
    assert exit_code(checks) == 1 and exit_code(checks[:2]) == 0


async def test_tapebot_doctor_as_a_process_reads_env_files(fakes, tmp_path):
    """`python -m tapebot doctor`, the way an operator runs it, with the tokens in $TAPEBOT_HOME/.env."""
    llm, api, dc = fakes
    llm.script(Reply("ok"))
    home = _home(tmp_path, api, dc)
    env_file = home / ".env"
    env_file.write_text(
        f"TELEGRAM_BOT_TOKEN={TG_TOKEN}\nDISCORD_BOT_TOKEN={DC_TOKEN}\nOPENAI_API_KEY={KEY}\n"
        f"OPENAI_BASE_URL={llm.openai_base_url}\n"
    )
    env_file.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN", "_BASE_URL"))}
    env.update(TAPEBOT_HOME=str(home), PYTHONPATH=str(ROOT))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tapebot",
        "doctor",
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    text = out.decode()
    # the real date decides the calendar line; everything that can fail for real must pass
    assert "✓ model main" in text and "✓ telegram login" in text and "✓ discord login" in text, (
        text + err.decode()
    )
    assert "✗ calendar" not in text
    failed = [line for line in text.splitlines() if line.startswith("✗")]
    assert failed == [] or failed == [_line(text, "trading calendar")], text
    assert proc.returncode == (1 if failed else 0)


# bwrap as it fails inside a podman/Docker container run without extra flags
CONTAINER_BWRAP = """#!/bin/sh
echo "bwrap: Can't mount proc on /newroot/proc: Operation not permitted" >&2
exit 1
"""


@pytest.mark.parametrize("container", [True, False])
def test_sandbox_installed_but_unable_says_the_true_reason(tmp_path, monkeypatch, container):
    from agent.tools import sandbox

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bwrap").write_text(CONTAINER_BWRAP)
    (bin_dir / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(sandbox, "_probe_cache", {})
    settings = load_settings(tmp_path / "home", {}, require_model=False)
    check = check_sandbox(settings, container=container)
    assert check.status == "warn"
    assert check.detail.startswith(
        "bubblewrap is installed but cannot create a sandbox here: "
        "bwrap: Can't mount proc on /newroot/proc: Operation not permitted"
    )
    assert "install bubblewrap" not in check.fix.lower()
    if container:
        assert "--security-opt systempaths=unconfined" in check.fix
    else:
        assert "unprivileged user namespaces" in check.fix
    assert "unsandboxed_exec" in check.fix
    # what the model is told when it tries exec_command says the same
    refusal = sandbox.refusal(sandbox.status(sandbox_policy(settings)))
    assert "installed but cannot create a sandbox" in refusal and "Install bubblewrap" not in refusal


def sandbox_policy(settings):
    from bot.parts import local_policy

    return local_policy(settings)


def test_container_detection(tmp_path):
    from agent.tools.sandbox import in_container

    assert not in_container(tmp_path, {})
    assert in_container(tmp_path, {"container": "podman"})
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".containerenv").write_text("")
    assert in_container(tmp_path, {})
