"""The command line as a packager and an operator meet it: --version, `python -m tapebot`, shell
completion, `db backup`, log files with rotation, quiet third-party loggers and .env files."""

from __future__ import annotations

import asyncio
import io
import logging
import logging.handlers
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tomllib
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.cli import CliContext, build_parser, main
from bot.cli.completion import script
from bot.logs import configure_logging
from memory.db import backup_sqlite, upgrade
from tests.fakes.discord_fake import FakeDiscord
from tests.fakes.llm_server import ScriptedLLMServer
from tests.fakes.telegram_api import FakeBotAPI

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "123456:TEST-token-abcdef"
DC_TOKEN = "discord-token-0123456789"


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    sys_out, sys_err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        try:
            code = main(argv)
        except SystemExit as exc:
            code = int(exc.code or 0)
    finally:
        sys.stdout, sys.stderr = sys_out, sys_err
    return code, out.getvalue(), err.getvalue()


def _pyproject_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


# ---- version and entry points -----------------------------------------------------------------
def test_version():
    code, out, _ = _run(["--version"])
    assert code == 0
    assert out.strip() == f"tapebot {_pyproject_version()}"


def test_python_dash_m_tapebot():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "tapebot", "--version"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"tapebot {_pyproject_version()}"
    done = subprocess.run(
        [sys.executable, "-m", "tapebot", "--help"], capture_output=True, text=True, env=env, timeout=60
    )
    assert "doctor" in done.stdout and "completion" in done.stdout


# ---- completion --------------------------------------------------------------------------------
def _bash_complete(line: str) -> list[str]:
    words = line.split(" ")
    program = (
        script("bash", build_parser())
        + f"\nCOMP_WORDS=({' '.join(repr(w) for w in words)})\nCOMP_CWORD={len(words) - 1}\n"
        + '_shtab_tapebot\nprintf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return sorted(w for w in done.stdout.split("\n") if w)


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash here")
def test_bash_completion():
    assert _bash_complete("tapebot d") == ["data", "db", "doctor"]
    assert _bash_complete("tapebot db b") == ["backup"]
    assert _bash_complete("tapebot --home /x c") == ["chat", "completion", "config"]
    assert _bash_complete("tapebot completion ") == ["bash", "zsh"]
    assert _bash_complete("tapebot completion --h") == ["--help"]
    assert _bash_complete("tapebot memory s") == ["search"]
    assert _bash_complete("tapebot data u") == ["update", "update-calendar"]
    assert "--version" in _bash_complete("tapebot --")


def test_zsh_completion():
    text = script("zsh", build_parser())
    assert text.startswith("#compdef tapebot")
    assert "_shtab_tapebot_db_commands" in text and "upgrade:" in text and "backup:" in text
    assert '"--home[' in text and ":_files" in text  # paths complete as file names
    if shutil.which("zsh"):
        done = subprocess.run(["zsh", "-n", "-c", text], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr


def test_every_extension_has_completion_words():
    from bot.cli import EXTENSIONS
    from bot.cli.completion import EXTENSION_WORDS

    assert set(EXTENSIONS) <= set(EXTENSION_WORDS)


def test_completion_command_prints_the_script():
    code, out, _ = _run(["completion", "bash"])
    assert code == 0 and "-F _shtab_tapebot tapebot" in out


# ---- db backup -----------------------------------------------------------------------------------
async def test_db_backup_is_a_private_timestamped_copy(tmp_path, monkeypatch):
    home = tmp_path / "home"
    url = f"sqlite+aiosqlite:///{home / 'tapebot.db'}"
    await upgrade(url)
    with closing(sqlite3.connect(home / "tapebot.db")) as con, con:
        con.execute("create table marker(v text)")
        con.execute("insert into marker values ('kept')")
    monkeypatch.setenv("TAPEBOT_HOME", str(home))
    code, out, err = await asyncio.to_thread(_run, ["db", "backup"])
    assert code == 0, err
    path = Path(out.strip().removeprefix("backed up to "))
    assert path.parent == home / "backups"
    assert path.name.startswith("tapebot-") and path.name.endswith("Z.db")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    with closing(sqlite3.connect(path)) as con, con:
        assert con.execute("select v from marker").fetchone() == ("kept",)
        assert con.execute("pragma integrity_check").fetchone() == ("ok",)


def test_db_backup_never_overwrites(tmp_path):
    db = tmp_path / "tapebot.db"
    sqlite3.connect(db).close()
    url = f"sqlite+aiosqlite:///{db}"
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    first = backup_sqlite(url, tmp_path / "b", now=when)
    second = backup_sqlite(url, tmp_path / "b", now=when)
    assert first.name == "tapebot-20260102T030405Z.db"
    assert second.name == "tapebot-20260102T030405Z-2.db"


def test_db_backup_refusals(tmp_path, monkeypatch):
    monkeypatch.setenv("TAPEBOT_HOME", str(tmp_path / "empty"))
    code, _, err = _run(["db", "backup"])
    assert code == 1 and "no database at" in err
    monkeypatch.setenv("TAPEBOT_DATABASE_URL", "postgresql+asyncpg://u:p@localhost/db")
    code, _, err = _run(["db", "backup"])
    assert code == 1 and "pg_dump" in err


# ---- logging -----------------------------------------------------------------------------------
@pytest.fixture
def clean_root_logger():
    """configure_logging changes process-wide loggers: put everything back for the other tests."""
    from bot.logs import QUIET_LOGGERS

    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    levels = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    voice = logging.getLogger("discord.client")
    filters = list(voice.filters)
    yield root
    for h in root.handlers:
        if h not in saved[0]:
            root.removeHandler(h)
            h.close()
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    voice.filters[:] = filters


def test_log_file_rotates_and_is_private(tmp_path, clean_root_logger):
    path = tmp_path / "logs" / "tapebot.log"
    configure_logging("INFO", file=path, max_bytes=2000, backups=2, console=False)
    configure_logging("INFO", file=path, max_bytes=2000, backups=2, console=False)  # idempotent
    files = [h for h in clean_root_logger.handlers if isinstance(h, logging.handlers.RotatingFileHandler)]
    assert len(files) == 1
    log = logging.getLogger("tapebot.test")
    for i in range(100):
        log.info("line %03d %s", i, "x" * 60)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    rotated = sorted(p.name for p in path.parent.iterdir())
    assert rotated == ["tapebot.log", "tapebot.log.1", "tapebot.log.2"]
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in path.parent.iterdir())
    assert "line 099" in path.read_text()


def test_third_party_chatter_is_quiet_at_info(tmp_path, clean_root_logger):
    path = tmp_path / "t.log"
    configure_logging("INFO", file=path, console=False)
    logging.getLogger("alembic.runtime.plugins").info("setup plugin alembic.autogenerate.schemas")
    logging.getLogger("discord.client").warning("PyNaCl is not installed, voice will NOT be supported")
    logging.getLogger("discord.client").warning("a real discord warning")
    logging.getLogger("tapebot").info("ours")
    text = path.read_text()
    assert "setup plugin" not in text and "voice will NOT" not in text
    assert "a real discord warning" in text and "ours" in text
    configure_logging("DEBUG", file=path, console=False)  # debugging shows everything again
    logging.getLogger("alembic.runtime.plugins").debug("now visible")
    assert "now visible" in path.read_text()


def test_log_file_option_overrides_config(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[log]\nfile = "from-config.log"\n')
    ctx = CliContext(home=home, environ={})
    assert ctx.settings(require_model=False).log_file == home / "from-config.log"
    ctx = CliContext(home=home, environ={}, log_file=tmp_path / "cli.log")
    assert ctx.settings(require_model=False).log_file == tmp_path / "cli.log"


async def test_tapebot_run_starts_quietly_reads_env_and_logs_to_a_file(tmp_path):
    """One start with Telegram and Discord: no alembic plugin lines, no voice warning, the
    migrations said once, the log file written (and without the token); tokens from .env."""
    api = FakeBotAPI(token=TOKEN)
    await api.serve()
    dc = FakeDiscord(tls=True)
    await dc.start()
    async with ScriptedLLMServer() as llm:
        home = tmp_path / "home"
        home.mkdir()
        (home / "config.toml").write_text(
            f"""
[telegram]
api_base_url = "{api.base_url}"
allowed_users = [1001]

[discord]
api_base_url = "{dc.addresses["api_base_url"]}"
gateway_url = "{dc.addresses["gateway_url"]}"
allowed_users = [2002]
"""
        )
        (home / ".env").write_text(
            f"TELEGRAM_BOT_TOKEN={TOKEN}\nDISCORD_BOT_TOKEN={DC_TOKEN}\n"
            f"OPENAI_API_KEY=sk-test-000000000000\nOPENAI_BASE_URL={llm.openai_base_url}\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN", "_BASE_URL"))}
        env.update(
            TAPEBOT_HOME=str(home),
            TAPEBOT_SCHEDULER__ENABLED="false",
            PYTHONPATH=str(ROOT),
            SSL_CERT_FILE=dc.ca_file,  # the fake answers for discord.com
        )
        log_file = tmp_path / "run.log"
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tapebot",
            "--log-file",
            str(log_file),
            "run",
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await api.wait_for(lambda: api.calls_to("getUpdates"), timeout=60)
            await api.wait_for(lambda: bool(dc.identifies), timeout=60)
            await api.wait_for(lambda: "tapebot is running" in log_file.read_text(), timeout=60)
            proc.send_signal(signal.SIGTERM)
            _out, err = await asyncio.wait_for(proc.communicate(), 60)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    await dc.close()
    await api.close()
    text = err.decode()
    assert proc.returncode == 0, text[-2000:]
    assert "setup plugin" not in text and "Context impl" not in text
    assert "voice will NOT be supported" not in text
    assert "database migrated from an empty database to" in text
    logged = log_file.read_text()
    assert "tapebot is running" in logged and "stopping" in logged
    for secret in (TOKEN, DC_TOKEN):
        assert secret not in text and secret not in logged


def test_init_makes_a_private_home_and_config(tmp_path):
    home = tmp_path / "new-home"
    code, _, err = _run(["--home", str(home), "init"])
    assert code == 0, err
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "config.toml").stat().st_mode) == 0o600
    code, _, err = _run(["--home", str(home), "init", "--force"])
    assert code == 0, err
    assert stat.S_IMODE((home / "config.toml").stat().st_mode) == 0o600
