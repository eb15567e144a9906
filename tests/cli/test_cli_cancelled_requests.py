"""Cancelled means cancelled: a request stopped by Ctrl-C in `tapebot chat --session`, or ended by
a model error, reaches the model's later requests marked "cancelled by the user — do not act on
it" (or failed), never as an open request. The real CLI against the scripted LLM server; the test
reads the requests the model received."""

from __future__ import annotations

import os
import signal

from tests.fakes.cli_kit import chat_on_pty, finish, openai_env, read_until, run_cli
from tests.fakes.llm_server import Failure, Reply


def _texts(body: dict) -> list[tuple[str, str]]:
    """(role, text) of each message the model received (OpenAI chat format)."""
    out = []
    for m in body["messages"]:
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        out.append((m["role"], content or ""))
    return out


def _after(history: list[tuple[str, str]], request: str) -> tuple[str, str]:
    i = next(i for i, (role, text) in enumerate(history) if role == "user" and request in text)
    return history[i + 1]


def test_ctrl_c_in_a_session_marks_the_request_cancelled_for_every_later_turn(tmp_path, server):
    server.script(
        Reply(["Buying ", *["1000 shares… "] * 40], chunk_delay=0.5),
        Reply("Moutai closed at 1,480."),
        Reply("Nothing is pending."),
    )
    proc, master = chat_on_pty(tmp_path, server, "--session", "desk")
    seen = bytearray()
    try:
        read_until(master, b"you> ", seen)
        os.write(master, b"buy 1000 600519\n")
        read_until(master, b"Buying", seen)
        proc.send_signal(signal.SIGINT)
        read_until(master, b"Stopped the running turn.", seen)
        read_until(master, b"you> ", seen)
        os.write(master, b"how did moutai close?\n")
        read_until(master, b"Moutai closed at 1,480.", seen)
        read_until(master, b"you> ", seen)
        os.write(master, b"/exit\n")
        assert proc.wait(timeout=60) == 0
    finally:
        finish(proc, master)
    role, note = _after(_texts(server.requests[1].body), "buy 1000 600519")
    assert role == "assistant" and "cancelled by the user — do not act on it" in note
    assert "Nothing was carried out" in note
    assert "Buying" not in note  # the half-streamed answer is not stored as if given

    # the same session continued in a later invocation still carries the mark
    r = run_cli(tmp_path, openai_env(server), "chat", "--session", "desk", "-m", "anything pending?")
    assert r.returncode == 0, r.stderr
    history = _texts(server.requests[-1].body)
    assert _after(history, "buy 1000 600519") == (role, note)
    assert sum("buy 1000" in text for _, text in history) == 1


def test_a_model_error_leaves_the_request_marked_failed(tmp_path, server):
    server.script(
        Failure(401, {"error": {"message": "invalid api key", "type": "authentication_error"}}),
        Reply("Hello."),
    )
    env = openai_env(server)
    r = run_cli(tmp_path, env, "chat", "--session", "desk", "-m", "buy 1000 600519")
    assert r.returncode != 0
    r = run_cli(tmp_path, env, "chat", "--session", "desk", "-m", "hello")
    assert r.returncode == 0, r.stderr
    role, note = _after(_texts(server.requests[-1].body), "buy 1000 600519")
    assert role == "assistant" and "failed" in note and "do not act on it" in note
