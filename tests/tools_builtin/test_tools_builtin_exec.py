"""exec_command: allowlisted environment, timeout kills the group, output cap, redaction.

These hold in the sandbox and in the opt-in unsandboxed fallback alike: where bubblewrap is missing
the tests run unsandboxed (test_tools_builtin_sandbox.py covers the sandbox itself)."""

from __future__ import annotations

import os
import shutil

import pytest

from agent.errors import InvalidToolArguments, ToolTimedOut
from agent.tools.builtin.shell import CappedOutput, build_child_env


@pytest.fixture(autouse=True)
def _fallback_without_bwrap(policy):
    policy.unsandboxed_exec = shutil.which("bwrap") is None


@pytest.fixture
def leaky_env(monkeypatch, secret):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-leakleakleakleakleak0001")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-api03-leakleakleakleak0002")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123456789:AAFleakleakleakleakleakleakleak0003")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "awsleakleakleakleak0004")
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:pw@db/x")
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("LC_MY_API_KEY", "allowlisted-by-glob-but-secret-name")
    monkeypatch.setenv("TZ", f"contains-{secret}")  # allowlisted name, secret value


async def test_child_env_has_no_secrets(call, leaky_env, secret, policy):
    out = await call("exec_command", command="env")
    assert "exit code: 0" in out
    for needle in ("leak", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TELEGRAM_BOT_TOKEN", "AWS_SECRET",
                   "DATABASE_URL", "LC_MY_API_KEY", secret, "TZ="):  # fmt: skip
        assert needle not in out
    assert "LANG=C.UTF-8" in out
    assert "PATH=" in out


def test_build_child_env_allowlist(policy):
    env = build_child_env(
        policy,
        {
            "PATH": "/bin",
            "FOO": "bar",
            "GITHUB_TOKEN": "x",
            "LC_ALL": "C",
            "HOME": "/home/u",
            "MY_PASSWORD": "p",
        },
    )
    assert env == {"PATH": "/bin", "LC_ALL": "C", "HOME": "/home/u"}
    policy.env_allowlist = ["FOO", "GITHUB_TOKEN", "MY_PASSWORD"]
    env = build_child_env(policy, {"FOO": "bar", "GITHUB_TOKEN": "x", "MY_PASSWORD": "p"})
    assert env == {"FOO": "bar", "PATH": os.defpath}  # secret names dropped even if allowlisted


async def test_runs_in_workspace_and_reports_exit_code(call, policy):
    out = await call("exec_command", command="pwd; echo oops >&2; exit 3")
    assert "exit code: 3" in out
    assert str(policy.workspace.resolve()) in out or str(policy.workspace) in out
    assert "oops" in out


async def test_timeout_kills_process_group(call, policy):
    marker = policy.workspace / "survived"
    with pytest.raises(ToolTimedOut, match=r"timed out after 0\.5s"):
        # the background child would touch the marker if it survived the kill
        await call(
            "exec_command", command=f"(sleep 1.5; touch {marker}) & echo started; sleep 30", timeout=0.5
        )
    # give a survivor time to act; a killed group never creates the file
    import asyncio

    await asyncio.sleep(1.6)
    assert not marker.exists()


async def test_timeout_error_includes_partial_output(call):
    with pytest.raises(ToolTimedOut) as info:
        await call("exec_command", command="echo before-the-hang; sleep 30", timeout=0.5)
    assert "before-the-hang" in str(info.value)


async def test_background_child_does_not_hold_the_call(call):
    # the shell exits at once; its background child keeps stdout open
    out = await call("exec_command", command="sleep 20 & echo done", timeout=10)
    assert "done" in out and "exit code: 0" in out


async def test_output_cap_keeps_head_and_tail(call, policy):
    policy.exec_output_cap = 3000
    out = await call("exec_command", command="seq 1 20000")
    assert "output truncated" in out
    assert "\n1\n2\n3\n" in out
    assert "20000" in out  # the tail survives
    assert len(out) < 3000 + 300


def test_capped_output_unit():
    buf = CappedOutput(100)
    for _ in range(10):
        buf.feed(b"x" * 50)
    assert buf.truncated and buf.total == 500
    assert "400 bytes omitted" in buf.text()
    small = CappedOutput(100)
    small.feed(b"hello")
    assert small.text() == "hello" and not small.truncated


async def test_output_is_redacted(call, secret):
    out = await call("exec_command", command=f"echo {secret}; echo Bearer abcdefghijklmnopqrstuvwxyz012345")
    assert secret not in out
    assert "abcdefghijklmnopqrstuvwxyz" not in out


async def test_bad_arguments(call):
    with pytest.raises(InvalidToolArguments):
        await call("exec_command", command="  ")
    with pytest.raises(InvalidToolArguments):
        await call("exec_command", command="true", timeout=0)
