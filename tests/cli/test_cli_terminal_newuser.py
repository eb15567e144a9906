"""The terminal treats a card the way the chats do. A longer
message typed at an approval prompt is a new request (the card closes unrun, "moved on", and the
message is the next turn); a short unclear reply gets a hint and the card stays. The real CLI in a
subprocess against the scripted LLM server."""

from __future__ import annotations

import json
import os
import signal

from tests.fakes.cli_kit import chat_on_pty, finish, openai_env, read_until, run_cli
from tests.fakes.llm_server import Reply, ToolCall

WRITE = Reply(tool_calls=[ToolCall("write_file", {"path": "plan.txt", "content": "no position above 15%"})])
LONG = "actually, what is my biggest position right now?"


def _user_texts(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], str)]


def test_a_longer_message_at_the_card_moves_on_and_runs_as_the_next_turn(tmp_path, server):
    server.script(WRITE, Reply("Moutai is your biggest position."))
    r = run_cli(tmp_path, openai_env(server), "chat", stdin=f"save my plan\n{LONG}\n/exit\n")
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "workspace" / "plan.txt").exists()
    assert "not an answer" not in r.stderr
    assert "moved on" in r.stderr.lower()
    assert "Moutai is your biggest position." in r.stdout
    # the sentence reached the model as the user's next message, after the closed call
    last = server.requests[-1].body
    assert any(LONG in text for text in _user_texts(last)), json.dumps(last["messages"])[:2000]
    assert len(server.requests) == 2  # the closed card's turn did not call the model again


def test_a_short_unclear_reply_gets_the_hint_with_always_and_the_card_stays(tmp_path, server):
    server.script(WRITE, Reply("Saved your plan."))
    r = run_cli(tmp_path, openai_env(server), "chat", stdin="save my plan\n3\nyes\n/exit\n")
    assert r.returncode == 0, r.stderr
    assert "always" in r.stderr.split("not an answer", 1)[1].splitlines()[0]
    assert (tmp_path / "workspace" / "plan.txt").exists()


def test_ctrl_c_at_an_approval_prompt_denies_the_card_and_says_so(tmp_path, server):
    server.script(WRITE, Reply("Not saved."))
    proc, master = chat_on_pty(tmp_path, server)
    seen = bytearray()
    try:
        read_until(master, b"you> ", seen)
        os.write(master, b"save my plan\n")
        read_until(master, b"Allow write_file?", seen)
        proc.send_signal(signal.SIGINT)
        read_until(master, b"denied", seen)
        read_until(master, b"Not saved.", seen)
        read_until(master, b"you> ", seen)
        os.write(master, b"/exit\n")  # the prompt after the card still reads the next line
        assert proc.wait(timeout=60) == 0
    finally:
        finish(proc, master)
    assert not (tmp_path / "workspace" / "plan.txt").exists()


def test_ctrl_d_on_an_interactive_terminal_quits(tmp_path, server):
    proc, master = chat_on_pty(tmp_path, server)
    seen = bytearray()
    try:
        read_until(master, b"Ctrl-D", seen)
        read_until(master, b"you> ", seen)
        os.write(master, b"\x04")  # Ctrl-D at an empty line: end of input
        assert proc.wait(timeout=60) == 0
    finally:
        finish(proc, master)


def test_a_rejected_trade_is_marked_failed_in_the_progress_line(tmp_path, server):
    """A tool result with status rejected/failed is ✗, as in the chats (bot/progress.failure_of)."""
    sell = Reply(tool_calls=[ToolCall("execute_trade", {"code": "600519", "side": "sell", "quantity": 100})])
    server.script(sell, Reply("The sell was rejected."))
    r = run_cli(tmp_path, openai_env(server), "chat", stdin="sell 100 moutai\nalways\n/exit\n")
    assert r.returncode == 0, r.stderr
    # the progress line's final state, as the chats show it (⏳ → ⏸ → ✓ or ✗)
    results = [x for x in r.stderr.splitlines() if x.startswith(("✓ execute_trade", "✗ execute_trade"))]
    assert len(results) == 1 and "✗ execute_trade: rejected" in results[0], r.stderr


def test_always_says_a_standing_approval_was_granted_as_the_chat_card_does(tmp_path, server):
    server.script(WRITE, Reply("Saved your plan."))
    r = run_cli(tmp_path, openai_env(server), "chat", stdin="save my plan\nalways\n/exit\n")
    assert r.returncode == 0, r.stderr
    out = r.stdout + r.stderr
    assert "Allowed by you, with a standing approval (" in out and "see /rules" in out, out


def test_the_terminal_card_and_rules_speak_the_configured_language(tmp_path, server):
    server.script(WRITE, Reply("已保存。"))
    env = {**openai_env(server), "TAPEBOT_AGENT__LANGUAGE": "zh"}
    r = run_cli(tmp_path, env, "chat", stdin="save my plan\n3\n总是允许\n/rules\n/exit\n")
    assert r.returncode == 0, r.stderr
    out = r.stdout + r.stderr
    assert "谁可以批准：你" in out and "“总是允许”将覆盖" in out, out
    assert "点按钮" not in out and "回复此卡片" not in out  # chat-only text stays in the chats
    assert "输入“好”、“总是允许”或“不”" in out  # the terminal's own hint line, and the unclear hint
    assert "长期允许（" in out and "由 terminal 于" in out  # the decision line and /rules, in Chinese


def test_the_english_terminal_card_has_its_own_hint_line(tmp_path, server):
    server.script(WRITE, Reply("Not saved."))
    r = run_cli(tmp_path, openai_env(server), "chat", stdin="save my plan\nno\n/exit\n")
    out = r.stdout + r.stderr
    assert "tap a button" not in out and "reply to this card" not in out
    assert "Type yes, always or no" in out


def test_tapebot_rules_from_the_shell_speaks_of_every_chat_and_an_unknown_id_fails(tmp_path):
    listed = run_cli(tmp_path, {}, "rules", "list")
    assert listed.returncode == 0, listed.stderr
    assert "in this chat" not in listed.stdout and "No standing approvals" in listed.stdout
    one = run_cli(tmp_path, {}, "rules", "list", "--chat", "telegram:1")
    assert "in this chat" not in one.stdout and "telegram:1" in one.stdout
    unknown = run_cli(tmp_path, {}, "rules", "revoke", "nope123")
    assert unknown.returncode == 1
    assert "nope123" in unknown.stderr and "in this chat" not in unknown.stderr
    none = run_cli(tmp_path, {}, "rules", "revoke", "all")
    assert none.returncode == 0 and "Revoked 0" in none.stdout


def test_exit_typed_at_a_card_closes_it_unrun_and_quits(tmp_path, server):
    server.script(WRITE, Reply("never asked for"))
    r = run_cli(tmp_path, openai_env(server), "chat", stdin="save my plan\n/exit\nyes\n")
    assert r.returncode == 0, r.stderr
    assert "not an answer" not in r.stderr and "moved on" in r.stderr.lower()
    assert not (tmp_path / "workspace" / "plan.txt").exists() and len(server.requests) == 1
