"""The terminal reads approvals like the chats do: the same words, the same card,
and only what is typed after the prompt appeared. The real CLI in a subprocess against the scripted
LLM server; the typed-ahead case runs it on a pseudo-terminal, as a user's shell would."""

from __future__ import annotations

import os

import pytest

from adapters.console import flush_typed_ahead
from tests.fakes.cli_kit import chat_on_pty, finish, openai_env, read_until, run_cli
from tests.fakes.llm_server import Reply, ToolCall

WRITE = Reply(tool_calls=[ToolCall("write_file", {"path": "plan.txt", "content": "no position above 15%"})])


@pytest.mark.parametrize("answer", ["好", "OK", "同意"])
def test_a_chat_affirmative_allows_in_the_terminal_too(tmp_path, server, answer):
    server.script(WRITE, Reply("Saved your plan."))
    r = run_cli(tmp_path, openai_env(server), "chat", stdin=f"save my plan\n{answer}\n/exit\n")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "workspace" / "plan.txt").exists()


@pytest.mark.parametrize("answer", ["a", "3", "第三个", "deny", "👍"])
def test_words_that_are_not_consent_in_chat_are_not_consent_in_the_terminal(tmp_path, server, answer):
    server.script(WRITE, Reply("Not saved."))
    r = run_cli(
        tmp_path, openai_env(server), "chat", stdin=f"save my plan\n{answer}\n{answer}\n{answer}\nno\n/exit\n"
    )  # an unclear reply leaves the card waiting (as in the chats); the "no" closes it
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "workspace" / "plan.txt").exists()
    assert "Not saved." in r.stdout


def test_the_terminal_card_has_the_chat_cards_content(tmp_path, server):
    server.script(
        Reply(tool_calls=[ToolCall("execute_trade", {"code": "600519", "side": "buy", "quantity": 100})]),
        Reply("Not bought."),
    )
    r = run_cli(tmp_path, openai_env(server), "chat", stdin="buy 100 moutai\nno\n/exit\n")
    assert r.returncode == 0, r.stderr
    out = r.stdout + r.stderr
    for part in ("贵州茅台 (600519)", "BUY 100", "PAPER", "Last price", "2025-09-03", "Estimated amount",
                 "Who may approve: you", "Expires", "buy 600519 ≤ 100 per order", "[always]"):  # fmt: skip
        assert part in out, part


def test_flush_discards_what_was_typed_before_the_prompt():
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "r", closefd=False) as tty:
            os.write(master, b"y\n")  # typed while the turn was still working
            flush_typed_ahead(tty)
            os.write(master, b"no\n")  # typed after the prompt
            assert os.read(slave, 100).strip() == b"no"
    finally:
        os.close(master)
        os.close(slave)


def test_an_answer_typed_ahead_of_the_card_is_discarded_on_a_tty(tmp_path, server):
    """Item 2: "y" typed while the turn is still working used to answer the approval prompt that
    appeared later. On a terminal it is discarded; only the "no" typed after the prompt counts."""
    server.script(WRITE, Reply("Not saved."))
    proc, master = chat_on_pty(tmp_path, server)
    seen = bytearray()
    try:
        read_until(master, b"you> ", seen)
        os.write(master, b"save my plan\ny\n")  # "y" is typed ahead, before any card exists
        read_until(master, b"Allow write_file?", seen)
        os.write(master, b"no\n")
        read_until(master, b"Not saved.", seen)
        read_until(master, b"you> ", seen)
        os.write(master, b"/exit\n")
        assert proc.wait(timeout=60) == 0
    finally:
        finish(proc, master)
    assert not (tmp_path / "workspace" / "plan.txt").exists()


def test_rules_in_the_terminal_list_and_revoke(tmp_path, server):
    server.script(WRITE, Reply("Saved your plan."))
    r = run_cli(
        tmp_path,
        openai_env(server),
        "chat",
        stdin="save my plan\nalways\n/rules\n/rules revoke all\n/rules\n/exit\n",
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "workspace" / "plan.txt").exists()
    assert "write_file plan.txt" in r.stderr and "granted by terminal" in r.stderr
    assert "Revoked 1 standing approval(s)." in r.stderr and "No standing approvals" in r.stderr


def test_standing_approvals_granted_in_an_earlier_terminal_session_are_listed_and_apply(tmp_path, server):
    """The terminal is one chat, like a DM: its standing approvals outlive the session (a new
    `tapebot chat` process, or /new) — /rules lists them, they apply, and they can be revoked."""
    server.script(WRITE, Reply("Saved your plan."))
    first = run_cli(tmp_path, openai_env(server), "chat", stdin="save my plan\nalways\n/exit\n")
    assert first.returncode == 0, first.stderr
    (tmp_path / "workspace" / "plan.txt").unlink()

    # a second process, a new session: no card, the rule covers the same path
    server.script(WRITE, Reply("Saved it again."))
    second = run_cli(tmp_path, openai_env(server), "chat", stdin="/rules\nsave my plan again\n/exit\n")
    assert second.returncode == 0, second.stderr
    assert "write_file plan.txt" in second.stderr and "granted by terminal" in second.stderr
    assert (tmp_path / "workspace" / "plan.txt").exists() and "Saved it again." in second.stdout
    assert "Approval needed" not in second.stdout + second.stderr

    # /new keeps the terminal's rules too; revoking them makes the next write ask again
    third = run_cli(tmp_path, openai_env(server), "chat", stdin="/new\n/rules revoke all\n/rules\n/exit\n")
    assert "Revoked 1 standing approval(s)." in third.stderr and "No standing approvals" in third.stderr
    rules = run_cli(tmp_path, openai_env(server), "rules", "list")
    assert "write_file" not in rules.stdout
