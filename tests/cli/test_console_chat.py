"""`tapebot chat` goes through the gateway as a chat:
the real CLI in a subprocess, on a pipe and on a pseudo-terminal, against the scripted LLM server.
Commands are the chats' (answered locally, no model call), cards are read by the chats' consent
reading, Ctrl-C at a card is an explicit deny."""

from __future__ import annotations

import os
import signal
import stat

from tests.fakes.cli_kit import chat_on_pty, finish, openai_env, read_until, run_cli
from tests.fakes.llm_server import Reply, ToolCall


def _write(path: str) -> Reply:
    return Reply(tool_calls=[ToolCall("write_file", {"path": path, "content": "no position above 15%"})])


def test_a_streamed_answer_is_shown_once_and_status_needs_no_model(tmp_path, server):
    # an answer streamed slowly enough to be edited several times: each edit extends the text, so
    # only the new part is written and the answer appears once, whole
    chunks = ["Moutai ", "closed ", "at ", "1,480.55 ", "on ", "2025-09-03."]
    server.script(Reply(chunks, chunk_delay=0.3))
    r = run_cli(tmp_path, openai_env(server), "chat", stdin="how did moutai close?\n/status\n/help\n/exit\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("Moutai closed at 1,480.55 on 2025-09-03.") == 1, r.stdout
    assert "Model: main" in r.stderr and "Session: terminal:" in r.stderr  # the chats' /status
    assert "/rules" in r.stderr  # the chats' /help, grouped as in the chats, no tool names
    assert "Background tasks and briefs" in r.stderr and "screen_stocks" not in r.stderr
    assert len(server.requests) == 1  # /status and /help never reached the model


def test_commands_new_and_rules_are_the_chats(tmp_path, server):
    server.script(_write("plan.txt"), Reply("Saved your plan."))
    r = run_cli(
        tmp_path,
        openai_env(server),
        "chat",
        "--session",
        "work",
        stdin="save my plan\nalways\n/rules\n/new\n/status\n/rules revoke all\n/rules\n/exit\n",
    )
    assert r.returncode == 0, r.stderr
    out = r.stderr
    assert "Session: terminal:work" not in out.split("Started a new conversation.", 1)[1]  # /new: a new one
    assert "write_file plan.txt" in out and "granted by terminal" in out  # /rules lists the grant
    assert "Revoked 1 standing approval(s)." in out and "No standing approvals" in out
    assert len(server.requests) == 2


def test_cards_on_a_terminal_yes_no_unclear_and_ctrl_c(tmp_path, server):
    server.script(
        _write("a.txt"),
        Reply("Not saved."),
        _write("b.txt"),
        Reply("Saved b."),
        _write("c.txt"),
        Reply("Not saved c."),
    )
    proc, master = chat_on_pty(tmp_path, server)
    seen = bytearray()
    try:
        read_until(master, b"you> ", seen)
        os.write(master, b"save a\n")
        read_until(master, b"Allow write_file?", seen)
        os.write(master, b"3\n")  # not an answer: the card stays
        read_until(master, b"not an answer: type yes, always or no", seen)
        read_until(master, b"Allow write_file?", seen)
        os.write(master, b"no\n")
        read_until(master, b"Denied by you", seen)
        read_until(master, b"Not saved.", seen)
        read_until(master, b"you> ", seen)

        os.write(master, b"save b\n")
        read_until(master, b"Allow write_file?", seen)
        os.write(master, b"yes\n")
        read_until(master, b"Approved by you", seen)
        read_until(master, b"Saved b.", seen)
        read_until(master, b"you> ", seen)

        os.write(master, b"save c\n")
        read_until(master, b"Allow write_file?", seen)
        proc.send_signal(signal.SIGINT)  # Ctrl-C at the card: its deny, said as such
        read_until(master, b"write_file denied", seen)
        read_until(master, b"Denied by you", seen)
        read_until(master, b"Not saved c.", seen)
        read_until(master, b"you> ", seen)
        os.write(master, b"\x04")  # Ctrl-D quits
        assert proc.wait(timeout=60) == 0
    finally:
        finish(proc, master)
    ws = tmp_path / "workspace"
    assert not (ws / "a.txt").exists() and (ws / "b.txt").exists() and not (ws / "c.txt").exists()
    history = tmp_path / "chat_history"
    assert history.exists() and stat.S_IMODE(history.stat().st_mode) == 0o600
    assert "save b" in history.read_text()


def test_ctrl_c_while_a_turn_runs_is_the_chats_cancel(tmp_path, server):
    server.script(Reply(["Thinking about it", *[" slowly"] * 40], chunk_delay=0.5), Reply("Next answer."))
    proc, master = chat_on_pty(tmp_path, server)
    seen = bytearray()
    try:
        read_until(master, b"you> ", seen)
        os.write(master, b"think slowly\n")
        read_until(master, b"Thinking about it", seen)
        proc.send_signal(signal.SIGINT)
        read_until(master, b"Stopped the running turn.", seen)
        read_until(master, b"you> ", seen)
        os.write(master, b"and now?\n")
        read_until(master, b"Next answer.", seen)
        read_until(master, b"you> ", seen)
        os.write(master, b"/exit\n")
        assert proc.wait(timeout=60) == 0
    finally:
        finish(proc, master)


def test_background_work_is_reported_through_the_gateway_before_quitting(tmp_path, server):
    def report(body):
        assert "[SYSTEM NOTIFICATION - NOT USER INPUT]" in str(body["messages"])
        return Reply("Backtest finished: see the equity curve.")

    server.script(
        Reply(tool_calls=[ToolCall("run_backtest", {"codes": ["600519"], "start": "2025-01-02"})]),
        Reply("Started the backtest."),
        report,
    )
    r = run_cli(tmp_path, openai_env(server), "chat", stdin="backtest 600519 this year\n/exit\n")
    assert r.returncode == 0, r.stderr
    assert "Started the backtest." in r.stdout and "Backtest finished: see the equity curve." in r.stdout
    assert r.stdout.count("Backtest finished") == 1 and len(server.requests) == 3
    saved = [line.split("saved ", 1)[1] for line in r.stderr.splitlines() if line.startswith("saved ")]
    assert saved and saved[0].endswith(".png")  # the task's chart, as the chats get it as a photo


def test_session_picks_the_conversation_and_each_run_starts_its_own_otherwise(tmp_path, server):
    server.script(Reply("Noted: 600519."), Reply("You asked about 600519."), Reply("Nothing yet."))
    env = openai_env(server)
    first = run_cli(tmp_path, env, "chat", "--session", "work", stdin="remember 600519\n/exit\n")
    second = run_cli(tmp_path, env, "chat", "--session", "work", stdin="what did I ask?\n/status\n/exit\n")
    assert first.returncode == second.returncode == 0, second.stderr
    assert "Session: terminal:work" in second.stderr
    assert "remember 600519" in str(server.requests[1].body["messages"])
    third = run_cli(tmp_path, env, "chat", stdin="what did I ask?\n/exit\n")  # a session of its own
    assert third.returncode == 0 and "remember 600519" not in str(server.requests[2].body["messages"])


def test_alerts_on_the_terminal_set_listed_removed_and_the_data_date_in_status(tmp_path, server):
    server.script(
        Reply(tool_calls=[ToolCall("manage_alerts", {"action": "create", "kind": "close_below", "code": "600519", "value": 1400})]),
        Reply(["Alert set: 600519 close below 1400."]),
    )  # fmt: skip
    r = run_cli(
        tmp_path,
        openai_env(server),
        "chat",
        stdin="tell me when moutai closes below 1400\n/alerts\n/alerts remove 1\n/alerts\n/status\n/exit\n",
    )
    assert r.returncode == 0, r.stderr
    assert "#1 600519: close below 1400" in r.stderr  # /alerts, as in the chats
    assert "Alert #1 removed: 600519: close below 1400" in r.stderr
    assert "No alerts are set." in r.stderr
    assert "Market data: A-shares 2025-09-03 (" in r.stderr and "days old)" in r.stderr
    result = next(m for m in server.requests[-1].body["messages"] if m.get("role") == "tool")
    assert "alert #1 set: 600519: close below 1400" in result["content"]
