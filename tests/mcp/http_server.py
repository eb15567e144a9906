"""`tapebot mcp --http` as a real process for the tests: started on a free loopback port with a
home of its own, stopped with SIGTERM (then SIGKILL)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LISTENING = re.compile(r"MCP server listening on (http://\S+)")


@dataclass
class RunningServer:
    url: str
    token: str
    home: Path
    process: subprocess.Popen[str]
    output: list[str]


def server_env(home: Path, token: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "TAPEBOT_MCP_TOKEN"}
    env.update({"TAPEBOT_HOME": str(home), "TAPEBOT_MEMORY__ENABLED": "false", "PYTHONUNBUFFERED": "1"})
    if token:
        env["TAPEBOT_MCP_TOKEN"] = token
    return env


@contextmanager
def mcp_http_server(
    home: Path, *args: str, token: str = "", timeout: float = 90.0
) -> Iterator[RunningServer]:
    home.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "mcp", "--http", "127.0.0.1:0", *args],
        cwd=ROOT,
        env=server_env(home, token),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output: list[str] = []
    found = threading.Event()
    url: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            output.append(line)
            match = LISTENING.search(line)
            if match and not url:
                url.append(match.group(1))
                found.set()
        found.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        if not found.wait(timeout) or not url:
            raise RuntimeError("tapebot mcp --http did not start:\n" + "".join(output[-40:]))
        yield RunningServer(url[0], token, home, proc, output)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
