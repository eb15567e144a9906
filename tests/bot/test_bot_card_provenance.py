"""Cards say where an action came from (after catalogue case B5): a trade the model proposed after
reading outside content — a file, a web page, command output — says so on its card, naming what
was read; a long exec command is shown head AND tail with its full length, so a tail such as
`rm -rf` cannot hide behind the cut."""

from __future__ import annotations

from agent.providers.scripted import reply
from bot.cards import MAX_ARGS_CHARS, render_arguments
from tests.bot.conftest import ALICE
from tests.fakes.telegram_api import buttons_of

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
    card = await api.wait_for(lambda: next((m for m in api.sent(ALICE) if buttons_of(m)), None))
    assert "Proposed after reading outside content: read_file: tips.txt" in card["text"]


async def test_a_trade_the_user_asked_for_directly_has_no_such_line(harness):
    harness.script.add(reply(tool_calls=[("execute_trade", BUY)]), reply("Done."))
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "buy 100 600519", user_id=ALICE)
    card = await api.wait_for(lambda: next((m for m in api.sent(ALICE) if buttons_of(m)), None))
    assert "outside content" not in card["text"]


def test_a_cut_exec_card_shows_head_tail_and_length():
    command = "echo " + "x" * 3000 + " && rm -rf ~/important"
    shown = render_arguments({"command": command}, "ab" * 32)
    assert shown.startswith('{\n "command": "echo xxx')
    assert 'rm -rf ~/important"\n}' in shown  # the tail is there
    full = len('{\n "command": "' + command + '"\n}')
    assert f"of {full:,} chars not shown; sha256 abababababababab" in shown
    assert len(shown) < MAX_ARGS_CHARS + 120
