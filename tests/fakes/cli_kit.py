"""The real `tapebot` command line in a subprocess, for end-to-end tests: run once with input
on a pipe (`run_cli`), or as an interactive chat on a pseudo-terminal (`chat_on_pty`, read with
`read_until`, ended with `finish`); its model is the scripted LLM server (`server`)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.llm_server import ScriptedLLMServer

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-test-SECRET-0123456789abcdef"


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    srv = ScriptedLLMServer()
    srv.start_in_thread()
    yield srv
    srv.stop()


def openai_env(server: ScriptedLLMServer) -> dict[str, str]:
    return {"OPENAI_API_KEY": SECRET, "OPENAI_BASE_URL": server.openai_base_url}


def cli_env(home: Path, env_extra: dict[str, str]) -> dict[str, str]:
    """This process's environment without the developer's model keys, with `home` as
    TAPEBOT_HOME, long-term memory off, and `env_extra`."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "OPENAI_BASE_URL"}
    env.update({"TAPEBOT_HOME": str(home), "TAPEBOT_MEMORY__ENABLED": "false", **env_extra})
    return env


def run_cli(
    home: Path, env_extra: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        env=cli_env(home, env_extra),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
    )


def chat_on_pty(home: Path, server: ScriptedLLMServer, *args: str) -> tuple[subprocess.Popen, int]:
    """`tapebot chat *args` on a pseudo-terminal: the process and the terminal's master end."""
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "chat", *args],
        env=cli_env(home, openai_env(server)),
        cwd=ROOT,
        stdin=slave,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    return proc, master


def read_until(fd: int, needle: bytes, seen: bytearray, timeout: float = 60.0) -> None:
    """Read `fd` into `seen` until `needle` appears; then drop `seen` up to its end, so the next
    wait looks after it."""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        left = deadline - time.monotonic()
        assert left > 0, seen.decode(errors="replace")[-2000:]
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                chunk = b""
            assert chunk, seen.decode(errors="replace")[-2000:]
            seen += chunk
    del seen[: seen.index(needle) + len(needle)]


def finish(proc: subprocess.Popen, master: int) -> None:
    """Kill the chat if it is still running, and close its terminal."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    os.close(master)
