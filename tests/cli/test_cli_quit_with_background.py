"""Ctrl-D in `tapebot chat` while a background task runs: the task's progress line and report are
printed on lines of their own before the process ends — never after the "you> " prompt the Ctrl-D
left on the screen (while the task still runs, a note says the terminal waits for it). The real CLI on a pseudo-terminal against the
scripted LLM server."""

from __future__ import annotations

import os
import re
import select
import time

from tests.fakes.cli_kit import chat_on_pty, finish, read_until
from tests.fakes.llm_server import Reply, ToolCall

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def _read_to_exit(fd: int, proc, timeout: float = 90.0) -> bytes:
    out = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    return bytes(out)


def test_ctrl_d_with_a_background_task_running_reports_it_before_quitting(tmp_path, server):
    server.script(
        Reply(tool_calls=[ToolCall("run_backtest", {"codes": ["600519"], "start": "2025-01-02"})]),
        Reply("Started the backtest."),
        Reply(["Backtest ", "finished: ", "see ", "the ", "equity ", "curve."], chunk_delay=0.3),
    )
    proc, master = chat_on_pty(tmp_path, server)
    seen = bytearray()
    try:
        read_until(master, b"you> ", seen)
        os.write(master, b"backtest 600519 this year\n")
        read_until(master, b"Started the backtest.", seen)
        read_until(master, b"you> ", seen)
        os.write(master, b"\x04")  # Ctrl-D at the prompt while the task (or its report) runs
        rest = _read_to_exit(master, proc)
        assert proc.wait(timeout=60) == 0
    finally:
        finish(proc, master)
    after = ANSI.sub(b"", bytes(seen) + rest).decode(errors="replace")  # all after the last "you> "
    assert "Backtest finished: see the equity curve." in after
    # what follows the Ctrl-D starts a line of its own: nothing is written after the prompt
    assert after.split("\n", 1)[0].strip() == "", after[:500]
