"""exec_command runs in a real bubblewrap sandbox.

These tests run `bwrap` for real (CI installs bubblewrap; see .ci/run). The attacks: an
approved command that rewrites tapebot's own policy in tapebot.db, reads config.toml through
`rev`/`base64`, or reads the parent's environment through /proc.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.errors import ToolDenied, ToolTimedOut
from agent.tools import sandbox
from agent.tools.workspace import DEFAULT_ENV_ALLOWLIST, LocalToolPolicy

# Tests that start the sandbox; the rest (refusal without one, the mount plan) run anywhere.
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) not installed")

LEAKS = {
    "OPENAI_API_KEY": "sk-proj-leakleakleakleakleak0001",
    "ANTHROPIC_API_KEY": "sk-ant-api03-leakleakleakleak0002",
    "TELEGRAM_BOT_TOKEN": "123456789:AAFleakleakleakleakleakleakleak0003",
    "DISCORD_BOT_TOKEN": "discordleakleakleakleakleak0004",
    "AWS_SECRET_ACCESS_KEY": "awsleakleakleakleak0005",
    "DATABASE_URL": "postgresql://u:pwleak@db/x",
}


@pytest.fixture
def leaky_env(monkeypatch):
    for name, value in LEAKS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LANG", "C.UTF-8")


@pytest.fixture
def approvals_db(home: Path) -> Path:
    """A real SQLite tapebot.db with a standing-approvals table (the attack's target)."""
    db = home / "tapebot.db"
    db.unlink()
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("create table standing_approvals (chat text, tool text)")
        conn.execute("insert into standing_approvals values ('telegram:5', 'exec_command')")
    return db


def _body(out: str) -> str:
    """The command's output, without the echoed command line and the exit-code line."""
    return out.split("\n", 2)[2]


def _rows(db: Path) -> list[tuple]:
    with closing(sqlite3.connect(db)) as conn, conn:
        return conn.execute("select * from standing_approvals").fetchall()


@needs_bwrap
async def test_sandbox_is_available_here(policy):
    status = sandbox.status(policy)
    assert status.sandboxed, status.reason


@needs_bwrap
async def test_a18_command_cannot_insert_standing_approvals_into_tapebot_db(call, home, approvals_db):
    """After an approved `ls`, the model runs a command that inserts standing approvals for
    other chats into tapebot.db. The database is not even visible inside the sandbox."""
    db = approvals_db
    sql = "insert into standing_approvals values ('telegram:666', 'execute_trade')"
    out = await call(
        "exec_command",
        command=(
            f'sqlite3 {db} "{sql}"; echo sqlite3-rc=$?; '
            f"python3 -c \"import sqlite3; c=sqlite3.connect('file:{db}?mode=rw', uri=True); "
            f'c.execute(\\"{sql}\\"); c.commit()"; echo python-rc=$?; '
            f'ln -s {db} link.db; sqlite3 link.db "{sql}"; echo link-rc=$?'
        ),
    )
    assert "sqlite3-rc=0" not in out and "python-rc=0" not in out and "link-rc=0" not in out, out
    assert _rows(db) == [("telegram:5", "exec_command")]


@needs_bwrap
async def test_a18_tapebot_home_outside_the_workspace_is_not_visible(call, home, policy):
    """The database path cannot even be listed; config.toml cannot be read, reversed or
    base64-encoded (a redaction bypass) because it is not there."""
    out = await call(
        "exec_command",
        command=(
            f"ls -la {home}; ls {home / 'tapebot.db'}; echo ls-rc=$?; "
            f"cat {home / 'config.toml'}; rev {home / 'config.toml'}; base64 {home / 'config.toml'}; "
            f"cat ../config.toml; cat ../.env; echo done"
        ),
    )
    body = _body(out)
    assert "ls-rc=0" not in body
    entries = {line.split()[-1] for line in body.splitlines() if re.match(r"[dl-][rwxsStT-]{9}", line)}
    assert entries == {".", "..", "workspace"}, body  # the home shows nothing but the workspace
    for needle in ("sk-should-never-be-read", "daer-reven-eb-dluohs", "c2stc2hvdWxk", "sk-env-file"):
        assert needle not in out, out
    assert "done" in out


@needs_bwrap
async def test_a18_only_the_workspace_is_writable(call, home, policy, tmp_path):
    """Writes outside the workspace fail or land in the command's private /tmp, never on the
    host."""
    out = await call(
        "exec_command",
        command=(
            f"echo x > {home / 'config.toml'}; echo home-rc=$?; echo x > /usr/evil; echo usr-rc=$?; "
            f"echo x > {tmp_path / 'outside'}; echo outside-rc=$?; echo ok > inside.txt; echo ws-rc=$?"
        ),
    )
    assert "home-rc=0" not in out and "usr-rc=0" not in out, out
    assert "ws-rc=0" in out
    assert (policy.workspace / "inside.txt").read_text() == "ok\n"
    assert "sk-should-never-be-read" in (home / "config.toml").read_text()
    assert not (tmp_path / "outside").exists()


@needs_bwrap
async def test_c3_env_is_only_the_allowlist(call, leaky_env, policy):
    """`env` / `printenv` show the allowlisted names only: no provider keys, bot tokens or
    database passwords."""
    out = await call("exec_command", command="env; echo ===; printenv")
    body = out.split("\n", 2)[2]
    names = {line.split("=", 1)[0] for line in body.splitlines() if "=" in line and line != "==="}
    allowed = set(DEFAULT_ENV_ALLOWLIST) | {"PWD", "SHLVL", "OLDPWD", "_"}
    assert names <= allowed | {n for n in names if n.startswith("LC_")}, names - allowed
    for value in LEAKS.values():
        assert value not in out
    assert f"HOME={policy.workspace}" in out


@needs_bwrap
async def test_c3_parent_proc_environ_shows_no_secrets(call, leaky_env):
    """The command has its own /proc (new pid namespace): /proc/$PPID/environ and
    /proc/1/environ are the sandbox's, and the bot's own process is not there at all."""
    import os

    out = await call(
        "exec_command",
        command=(
            "cat /proc/$PPID/environ | tr '\\0' '\\n'; cat /proc/1/environ | tr '\\0' '\\n'; "
            f"cat /proc/{os.getpid()}/environ; echo bot-rc=$?; ls /proc | grep -c '^[0-9]'"
        ),
    )
    for value in LEAKS.values():
        assert value not in out
    assert "bot-rc=0" not in out or os.getpid() < 5


@needs_bwrap
async def test_network_is_off_by_default_and_on_when_configured(call, policy):
    """The sandbox has no network unless `[tools] exec_network = true`: a TCP server listening on
    the host's loopback cannot be reached from inside."""
    connected = asyncio.Event()

    async def on_conn(reader, writer):
        connected.set()
        writer.close()

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    connect = f"s=socket.create_connection(('127.0.0.1', {port}), 3)"
    probe = f"python3 -c \"import socket; {connect}; print('CONNECTED')\"; echo rc=$?"
    try:
        out = _body(await call("exec_command", command=probe))
        assert "CONNECTED" not in out and "rc=0" not in out
        assert not connected.is_set()
        policy.exec_network = True
        out = _body(await call("exec_command", command=probe))
        assert "CONNECTED" in out, out
    finally:
        server.close()
        await server.wait_closed()


@needs_bwrap
async def test_time_limit_kills_sleep(call):
    with pytest.raises(ToolTimedOut):
        await call("exec_command", command="sleep 30", timeout=0.5)


@needs_bwrap
async def test_resource_limits_apply(call, policy):
    """CPU time, file size and core dumps are limited inside the sandbox."""
    policy.exec_file_size_mb = 1
    out = await call(
        "exec_command",
        command="ulimit -t; ulimit -c; head -c 3000000 /dev/zero > big; echo rc=$?; wc -c < big",
        timeout=20,
    )
    lines = out.splitlines()
    assert lines[2] != "unlimited" and int(lines[2]) <= 21
    assert lines[3] == "0"
    assert "rc=0" not in out
    assert (policy.workspace / "big").stat().st_size <= 1024 * 1024


async def test_no_sandbox_refuses_unless_opted_in(call, policy, monkeypatch):
    """Where no sandbox can be had, exec_command is refused with a clear message, unless
    `[tools] unsandboxed_exec = true`."""
    policy.bwrap = "/nonexistent/bwrap"
    with pytest.raises(ToolDenied, match=r"(?s)no sandbox.*bubblewrap.*unsandboxed_exec = true"):
        await call("exec_command", command="echo hi")
    assert not sandbox.status(policy).sandboxed
    policy.unsandboxed_exec = True
    out = await call("exec_command", command="echo hi")
    assert "hi" in out and "exit code: 0" in out


@needs_bwrap
def test_describe_says_what_the_sandbox_allows(policy):
    assert sandbox.describe(policy) == (
        "runs in a sandbox: only the workspace is writable, no network, no access to tapebot's files"
    )
    policy.exec_network = True
    assert "network allowed" in sandbox.describe(policy)
    policy.bwrap = "/nonexistent/bwrap"
    assert "will be refused" in sandbox.describe(policy)
    policy.unsandboxed_exec = True
    assert "WITHOUT a sandbox" in sandbox.describe(policy)


def test_protected_file_inside_the_workspace_is_masked(tmp_path):
    """A policy whose workspace contains the protected files (workspace = home) still hides
    them from the command."""
    home = tmp_path / "h"
    home.mkdir()
    (home / "config.toml").write_text("api_key = 'sk-inside-0000000000000000'\n")
    policy = LocalToolPolicy.for_home(home, workspace=home)
    argv = sandbox.bwrap_argv(policy, "cat config.toml", network=False)
    joined = " ".join(argv)
    assert f"--ro-bind /dev/null {home / 'config.toml'}" in joined


@needs_bwrap
async def test_protected_file_inside_the_workspace_is_not_readable(tmp_path):
    from agent.tools.builtin.shell import exec_command_impl

    home = tmp_path / "h"
    home.mkdir()
    (home / "config.toml").write_text("api_key = 'sk-inside-0000000000000000'\n")
    policy = LocalToolPolicy.for_home(home, workspace=home)
    out = await exec_command_impl(policy, "cat config.toml; echo x > config.toml; echo rc=$?", None)
    assert "sk-inside" not in out and "rc=0" not in out
    assert "sk-inside" in (home / "config.toml").read_text()


@needs_bwrap
async def test_a18_home_stays_hidden_below_an_extra_read_only_path(call, home, policy, tmp_path):
    """`exec_read_only_paths` naming a folder that contains TAPEBOT_HOME (say, the user's
    home) still does not expose config.toml or tapebot.db."""
    (tmp_path / "data.csv").write_text("a,b\n")
    policy.exec_read_only_paths = [tmp_path]
    out = _body(
        await call(
            "exec_command",
            command=f"cat {tmp_path / 'data.csv'}; cat {home / 'config.toml'}; ls {home}",
        )
    )
    assert "a,b" in out
    assert "sk-should-never-be-read" not in out and "tapebot.db" not in out, out


@needs_bwrap
@pytest.mark.parametrize("tool", ["read_file", "write_file"])
async def test_a18_file_tools_cannot_reach_tapebot_home(call, home, policy, approvals_db, tool):
    """A18 via the file tools: tapebot.db (and its WAL), config.toml and .env under TAPEBOT_HOME are
    out of reach by relative, absolute and results/ paths, and through a symlink the sandboxed shell
    planted in the workspace."""
    await call("exec_command", command=f"ln -s {approvals_db} db.lnk; ln -s ../config.toml cfg.lnk")
    assert (policy.workspace / "db.lnk").is_symlink()
    (home / "tapebot.db-wal").write_bytes(b"")
    targets = [
        "../tapebot.db",
        str(approvals_db),
        str(home / "tapebot.db-wal"),
        str(home / "config.toml"),
        str(home / ".env"),
        "../config.toml",
        "results/../tapebot.db",
        "db.lnk",
        "cfg.lnk",
    ]
    for path in targets:
        args = {"path": path} if tool == "read_file" else {"path": path, "content": "pwned"}
        with pytest.raises(ToolDenied):
            await call(tool, **args)
    assert _rows(approvals_db) == [("telegram:5", "exec_command")]
    assert "sk-should-never-be-read" in (home / "config.toml").read_text()


# ---- properties of the mount plan (no sandbox started) ------------------------------------------


def _mounts(argv: list[str]) -> list[tuple[str, str, str]]:
    """(option, source, destination) of every mount in a bwrap command line, in order."""
    out, i = [], 0
    two = {"--bind", "--ro-bind", "--ro-bind-try", "--symlink"}
    one = {"--tmpfs", "--proc", "--dev", "--remount-ro", "--chdir"}
    while i < len(argv) and argv[i] != "--":
        opt = argv[i]
        if opt in two:
            out.append((opt, argv[i + 1], argv[i + 2]))
            i += 3
        elif opt in one:
            out.append((opt, "", argv[i + 1]))
            i += 2
        else:
            i += 1
    return out


def _within(path: str, root: str) -> bool:
    return Path(path) == Path(root) or Path(path).is_relative_to(root)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    depth=st.integers(0, 3),
    layout=st.sampled_from(["inside", "is_home", "outside"]),
    extra=st.lists(st.sampled_from(["root", "home_parent", "unrelated", "workspace"]), max_size=3),
    network=st.booleans(),
)
def test_a18_property_home_is_never_exposed(tmp_path, depth, layout, extra, network):
    """Whatever the layout (home below extra read-only paths, workspace inside, equal to or
    outside the home), the only writable bind is the workspace, the home is covered by an empty
    tmpfs after every mount that could show it, and protected files inside the workspace are
    covered by /dev/null."""
    import tempfile

    with tempfile.TemporaryDirectory(dir=tmp_path) as base:
        root = Path(base)
        home = root.joinpath(*[f"d{i}" for i in range(depth)], "home")
        home.mkdir(parents=True)
        (home / "config.toml").write_text("x")
        (home / "tapebot.db").write_text("x")
        workspace = {"inside": home / "workspace", "is_home": home, "outside": root / "ws"}[layout]
        workspace.mkdir(exist_ok=True)
        paths = {"root": root, "home_parent": home.parent, "unrelated": root / "data", "workspace": workspace}
        policy = LocalToolPolicy.for_home(
            home, workspace=workspace, exec_read_only_paths=[paths[e] for e in extra]
        )
        mounts = _mounts(sandbox.bwrap_argv(policy, "true", network=network))
        rw = [m for m in mounts if m[0] == "--bind"]
        assert rw == [("--bind", str(workspace), str(workspace))]
        last_show = max(
            (i for i, (opt, _src, dst) in enumerate(mounts)
             if opt.startswith("--ro-bind") and _within(str(home), dst) and dst != "/dev/null"),
            default=-1,
        )  # fmt: skip
        covers = [i for i, (opt, _s, dst) in enumerate(mounts) if opt == "--tmpfs" and dst == str(home)]
        assert covers and covers[-1] > last_show
        ws_bind = mounts.index(rw[0])
        if layout == "is_home":
            for name in ("config.toml", "tapebot.db"):
                mask = ("--ro-bind", "/dev/null", str(home / name))
                assert mask in mounts and mounts.index(mask) > ws_bind
        else:
            assert ("--remount-ro", "", str(home)) in mounts[ws_bind:]
