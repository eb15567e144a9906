"""TAPEBOT_HOME is private: the folder 0700, its files 0600 whatever the umask;
`tapebot init` never writes a world-readable config; `tapebot config check` warns about looser
modes and says how to fix them."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.providers.scripted import ScriptedClient, reply
from bot import cli
from tests.bot.conftest import ALICE, Harness
from tests.fakes.telegram_api import FakeBotAPI


@pytest.fixture
def umask_000():
    old = os.umask(0)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def loose(home: Path) -> list[str]:
    """Everything under home (but the workspace, the command's own files) open to group/others."""
    found = []
    if mode(home) & 0o077:
        found.append(f"{home} {oct(mode(home))}")
    for path in home.rglob("*"):
        if "workspace" in path.relative_to(home).parts or path.is_symlink():
            continue
        if mode(path) & 0o077:
            found.append(f"{path.relative_to(home)} {oct(mode(path))}")
    return found


def test_c9_init_writes_a_private_config_under_umask_000(home, capsys, umask_000):
    """`tapebot init` creates TAPEBOT_HOME 0700 and config.toml 0600, even with umask 000."""
    assert cli.main(["init"]) == 0
    assert mode(home) == 0o700
    assert mode(home / "config.toml") == 0o600
    (home / "config.toml").chmod(0o644)
    assert cli.main(["init", "--force"]) == 0
    assert mode(home / "config.toml") == 0o600, "an overwrite never keeps a world-readable config"


async def test_c9_a_running_bot_keeps_its_home_private_under_umask_000(tmp_path, umask_000):
    """A fresh install run under umask 000 — the database with its -wal/-shm, traces,
    archives, spilled results — is 0600 in a 0700 home."""
    script = ScriptedClient([reply(tool_calls=[("read_file", {"path": "big.txt"})]), reply("x" * 200)])
    h = Harness(tmp_path / "home", FakeBotAPI(), script, {"TAPEBOT_AGENT__TOOL_RESULT_SPILL_CHARS": "500"})
    try:
        await h.start()
        (h.home / "workspace" / "big.txt").write_text("line\n" * 1000)
        h.api.push_text(ALICE, "read big.txt", user_id=ALICE)
        await h.api.wait_for(lambda: "x" * 200 in h.api.texts(ALICE), timeout=20)
        assert (h.home / "tapebot.db-wal").exists() and (h.home / "tapebot.db-shm").exists()
        assert loose(h.home) == []
    finally:
        await h.stop()  # the trace writer flushes on stop
    home = h.home
    assert (home / "tapebot.db").exists()
    assert list((home / "traces").rglob("*.jsonl")), "a trace was written"
    assert list((home / "results").iterdir()), "a large tool result was spilled"
    assert loose(home) == []
    assert os.umask(0) == 0, "the bot gives the process umask back when it stops"


def test_c9_config_check_warns_about_loose_modes(home, capsys):
    """`config check` names every group/world-accessible file or folder with the fix."""
    assert cli.main(["init"]) == 0
    capsys.readouterr()
    env = {"ANTHROPIC_API_KEY": "sk-ant-api03-x" + "0" * 20}
    with contextlib.ExitStack() as stack:
        mp = stack.enter_context(pytest.MonkeyPatch.context())
        for k, v in env.items():
            mp.setenv(k, v)
        assert cli.main(["config", "check"]) == 0
        out, err = capsys.readouterr()
        assert "open to other users" not in out + err
        if shutil.which("bwrap"):  # the sandbox status is part of the check
            assert "# exec_command: runs in a sandbox" in out

        (home / "tapebot.db").write_bytes(b"")
        (home / "tapebot.db").chmod(0o644)
        (home / "config.toml").chmod(0o664)
        home.chmod(0o755)
        assert cli.main(["config", "check"]) == 0
        out, err = capsys.readouterr()
    text = out + err
    assert f"chmod 700 {home}" in text
    assert f"chmod 600 {home / 'config.toml'}" in text
    assert f"chmod 600 {home / 'tapebot.db'}" in text
    assert "0644" in text or "rw-r--r--" in text


def test_c9_database_files_are_private_under_umask_000(tmp_path, umask_000):
    """The SQLite database and its -wal/-shm are created 0600 whatever the umask."""
    import asyncio

    from memory.db import Database

    async def go() -> None:
        db = Database(f"sqlite+aiosqlite:///{tmp_path / 'd' / 'tapebot.db'}")
        await db.start()
        try:
            for name in ("tapebot.db", "tapebot.db-wal", "tapebot.db-shm"):
                assert mode(tmp_path / "d" / name) == 0o600, name
        finally:
            await db.close()

    asyncio.run(go())


@given(mode_bits=st.integers(0, 0o777), name=st.sampled_from(["config.toml", "tapebot.db", "tapebot.db-wal"]))
@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_c9_property_loose_iff_group_or_other_bits(tmp_path, mode_bits, name):
    """A secret file is reported exactly when group or others have any permission on it."""
    import tempfile

    from config.filemodes import loose_modes

    with tempfile.TemporaryDirectory(dir=tmp_path) as d:
        home = Path(d)
        home.chmod(0o700)
        (home / name).write_text("x")
        (home / name).chmod(mode_bits)
        found = [m.path.name for m in loose_modes(home)]
        assert (name in found) == bool(mode_bits & 0o077)
