"""How a reply typed at a terminal card is read (issues 15 and 18): the terminal is a chat, so the
line reaches the gateway as a message and is read as the chats read it — a decision only through
agent/consent.read_consent, a longer message or a command moves on (the card closes unrun), a
short unclear reply gets the hint and the card stays. Silence (an empty line) is a no. The console
itself never turns a line into anything that could allow: see the property test in
tests/adapters/test_console_adapter.py."""

from __future__ import annotations

import pytest

from tests.fakes.cli_kit import openai_env, run_cli
from tests.fakes.llm_server import Reply, ToolCall

WRITE = Reply(tool_calls=[ToolCall("write_file", {"path": "plan.txt", "content": "x"})])


@pytest.mark.parametrize(
    ("reply", "written", "says"),
    [
        ("yes", True, "Approved by you"),
        ("总是允许", True, "with a standing approval"),
        ("no", False, "Denied by you"),
        ("", False, "Denied by you"),  # silence is a no
        ("3\nno", False, "not an answer"),  # unclear: the hint, and the card stays until the "no"
        ("👍\nno", False, "not an answer"),
        # question words: a question is never consent, the card stays until the "no"
        ("yes?\nno", False, "a question is not an answer"),
        ("可以？\nno", False, "a question is not an answer"),
        ("ok?\nyes", True, "a question is not an answer"),
        ("what is my biggest position?", False, "moved on"),
        ("/new", False, "moved on"),
    ],
)
def test_a_reply_at_the_card(tmp_path, server, reply, written, says):
    server.script(WRITE, Reply("done."), Reply("next."))
    r = run_cli(tmp_path, openai_env(server), "chat", stdin=f"save my plan\n{reply}\n/exit\n")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "workspace" / "plan.txt").exists() == written
    assert says in r.stdout + r.stderr
