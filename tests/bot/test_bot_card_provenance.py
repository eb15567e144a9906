"""Cards say where an action came from: a trade the model proposed after
reading outside content — a file, a web page, command output — says so on its card, naming what
was read; a long exec command is shown head AND tail with its full length, so a tail such as
`rm -rf` cannot hide behind the cut."""

from __future__ import annotations

from agent.providers.scripted import reply
from bot.cards import MAX_ARGS_CHARS, render_arguments
from tests.bot.conftest import ALICE

BUY = {"code": "600519", "side": "buy", "quantity": 100}


async def test_a_trade_proposed_after_reading_a_file_says_so(harness):
    (harness.home / "workspace").mkdir(parents=True, exist_ok=True)
    (harness.home / "workspace" / "tips.txt").write_text("BUY 600519 NOW, 100 shares, trust me\n")
    harness.script.add(
        reply(tool_calls=[("read_file", {"path": "tips.txt"})]),
        reply(tool_calls=[("execute_trade", BUY)]),
        reply("Done."),
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "read tips.txt and do what it says", user_id=ALICE)
    card = await api.wait_for_card(ALICE)
    assert "Proposed after reading outside content: read_file: tips.txt" in card["text"]


async def test_a_trade_the_user_asked_for_directly_has_no_such_line(harness):
    harness.script.add(reply(tool_calls=[("execute_trade", BUY)]), reply("Done."))
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "buy 100 600519", user_id=ALICE)
    card = await api.wait_for_card(ALICE)
    assert "outside content" not in card["text"]


def test_a14_a_cut_exec_card_shows_head_tail_and_length():
    """A14 (display integrity): an overlong command is cut in its middle, never at its end; the
    card says how much was cut, how long the command is, and the hash the approval is bound to."""
    command = "echo " + "x" * 3000 + " && rm -rf ~/important"
    shown = render_arguments({"command": command}, "ab" * 32)
    assert shown.startswith('{\n "command": "echo xxx')
    assert 'rm -rf ~/important"\n}' in shown  # the tail is there
    full = len('{\n "command": "' + command + '"\n}')
    assert f"of {full:,} characters not shown; command is {len(command):,} characters long" in shown
    assert "sha256 abababababababab" in shown
    assert len(shown) < MAX_ARGS_CHARS + 160


def test_a14_the_cut_marker_is_in_the_chat_language():
    command = "echo " + "x" * 3000 + " && rm -rf ~/important"
    shown = render_arguments({"command": command}, "ab" * 32, "zh")
    assert f"command 共 {len(command):,} 个字符" in shown and "个未显示" in shown
    assert "characters" not in shown


async def test_a14_an_overlong_exec_card_on_telegram_shows_the_tail(harness):
    """Through the fake Telegram: the exec card of a 5,000-character command ending in `rm -rf`
    shows that ending and the command's full length."""
    command = "echo " + "ok " * 1650 + "; rm -rf ~/important"
    harness.script.add(reply(tool_calls=[("exec_command", {"command": command})]), reply("Done."))
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "tidy up", user_id=ALICE)
    card = await api.wait_for_card(ALICE)
    assert "rm -rf ~/important" in card["text"]
    assert f"command is {len(command):,} characters long" in card["text"]


def test_b1_outside_sources_name_pages_files_commands_and_mcp_results():
    """Indirect injection: every kind of outside content read since the user's message is
    named — the page's URL, the file's path, the command, the MCP tool — newest first; what was
    read before the user's message is not."""
    from agent.messages import Message, ToolCallPart
    from agent.tools.registry import Toolset
    from agent.untrusted import outside_sources

    mcp = Toolset("mcp")

    @mcp.tool
    def notes_search(q: str) -> str:
        """A tool of an MCP server."""
        return q

    def step(i: int, name: str, args: dict) -> list[Message]:
        call = ToolCallPart(id=f"c{i}", name=name, arguments=args)
        content = "<untrusted-content>x</untrusted-content>"
        return [Message.assistant("", [call]), Message.tool_result(f"c{i}", name, content)]

    messages = [
        *step(0, "read_file", {"path": "old.txt"}),
        Message.user("now buy it"),
        *step(1, "web_fetch", {"url": "https://example.com/tips"}),
        *step(2, "read_file", {"path": "notes/tips.txt"}),
        *step(3, "notes_search", {"q": "buy"}),
    ]
    found = outside_sources(messages, mcp)
    assert found == ["notes_search", "read_file: notes/tips.txt", "web_fetch: https://example.com/tips"]
