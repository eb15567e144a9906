"""The console adapter on its own: typed lines become the chats' inbound values, and
nothing typed or pressed at the terminal can allow an approval except a line the gateway reads as
consent (agent/consent.read_consent) — Ctrl-C, an empty line and the end of input press only the
card's deny button."""

from __future__ import annotations

import asyncio
import io
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.base import Button, ButtonPress, Card, ChatRef, InboundCommand, InboundMessage, UserRef
from adapters.console import CardPrompt, ConsoleAdapter, ConsoleHooks
from bot import cards
from tests.fakes.waits import eventually

CHAT = ChatRef("terminal", "")
USER = UserRef("terminal", "terminal", "you")
BUTTONS = [[Button("Allow once", "o:ap1"), Button("Always", "a:ap1"), Button("Deny", "d:ap1")]]


def _adapter(stdin: str, busy: bool = False) -> tuple[ConsoleAdapter, list, io.StringIO, io.StringIO]:
    async def present(card: Card, buttons) -> CardPrompt:
        deny = next(b.data for row in buttons for b in row if b.data.startswith("d:"))
        return CardPrompt(card.text, "Allow write_file? ", deny, "Ctrl-C: denied")

    async def settled() -> None:
        return None

    hooks = ConsoleHooks(present_card=present, settled=settled, busy=lambda: busy)
    out, err = io.StringIO(), io.StringIO()
    adapter = ConsoleAdapter(CHAT, USER, hooks, streams=(io.StringIO(stdin), out, err))
    received: list = []

    async def handler(inbound) -> None:
        received.append(inbound)

    adapter.start_with = handler  # type: ignore[attr-defined]  # started inside the test's loop
    return adapter, received, out, err


def _run(adapter: ConsoleAdapter, card: bool = False) -> int:
    async def go() -> int:
        await adapter.start(adapter.start_with)  # type: ignore[attr-defined]
        if card:
            await adapter.send_card(CHAT, Card("t", "b", text="🔐 card"), buttons=BUTTONS)
        return await adapter.run()

    return asyncio.run(go())


def test_lines_become_messages_and_commands():
    _, received, _, _ = _run_lines("hello there\n/status\n/rules revoke all\n\n/exit\nnever read\n")
    assert [type(x) for x in received] == [InboundMessage, InboundCommand, InboundCommand]
    assert received[0].text == "hello there" and received[0].chat.key == "terminal"
    assert (received[1].name, received[1].args) == ("status", "")
    assert (received[2].name, received[2].args) == ("rules", "revoke all")
    assert len({x.update_id for x in received}) == 3  # every event its own id (dedupe is durable)


def _run_lines(stdin: str, card: bool = False):
    adapter, received, out, err = _adapter(stdin)
    assert _run(adapter, card) == 0
    return adapter, received, out, err


def test_end_of_input_at_a_card_presses_deny_and_exit_cancels_it():
    _, received, _, _ = _run_lines("", card=True)
    assert len(received) == 1 and isinstance(received[0], ButtonPress)
    assert cards.parse_callback(received[0].data) == cards.CardTap("deny", "ap1")
    _, received, _, _ = _run_lines("/exit\n", card=True)  # closes it unrun, as the chats' /cancel
    assert [(type(x), getattr(x, "name", "")) for x in received] == [(InboundCommand, "cancel")]


def test_ctrl_c_at_a_card_presses_deny_and_during_a_turn_cancels():
    async def at_card() -> list:
        adapter, received, _, err = _adapter("")
        await adapter.start(adapter.start_with)  # type: ignore[attr-defined]
        adapter.stdin = _Blocking()  # the user has not typed yet
        await adapter.send_card(CHAT, Card("t", "b", text="🔐 card"), buttons=BUTTONS)
        task = asyncio.ensure_future(adapter._read("Allow write_file? ", fresh=True))
        await eventually(adapter.stdin.begun.is_set)
        adapter._on_sigint()
        await task
        await adapter._settle()
        assert "Ctrl-C: denied" in err.getvalue()
        return received

    received = asyncio.run(at_card())
    assert len(received) == 1 and cards.parse_callback(received[0].data) == cards.CardTap("deny", "ap1")

    async def in_turn() -> list:
        adapter, received, _, _ = _adapter("", busy=True)
        await adapter.start(adapter.start_with)  # type: ignore[attr-defined]
        adapter._on_sigint()
        await adapter._settle()
        return received

    received = asyncio.run(in_turn())
    assert [(type(x), x.name) for x in received] == [(InboundCommand, "cancel")]


class _Blocking(io.StringIO):
    """A user who takes half a second to type `line`; `begun` is set once the read has started."""

    def __init__(self, line: str = "late line") -> None:
        super().__init__()
        self.line = line
        self.begun = threading.Event()

    def readline(self, *args) -> str:  # type: ignore[override]
        import time

        self.begun.set()
        time.sleep(0.5)  # the user typing: the card arrives meanwhile
        return self.line + "\n"


def test_a_line_begun_before_a_card_appeared_does_not_answer_it():
    """A "yes" typed at "you>" while a background task's turn put up a card is not sent
    (the gateway would read it as the card's answer); the user is told and asked again."""

    async def go() -> tuple[object, list, str]:
        adapter, received, _, err = _adapter("")
        await adapter.start(adapter.start_with)  # type: ignore[attr-defined]
        adapter.stdin = _Blocking("yes")
        reading = asyncio.ensure_future(adapter._read("you> ", fresh=False))
        await eventually(adapter.stdin.begun.is_set)
        await adapter.send_card(CHAT, Card("t", "b", text="🔐 card"), buttons=BUTTONS)
        return await reading, received, err.getvalue()

    line, received, _err = asyncio.run(go())
    assert line is not None and not isinstance(line, str) and received == []


@settings(max_examples=60, deadline=None)
@given(lines=st.lists(st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"), max_size=30), max_size=4))  # fmt: skip
def test_property_typed_lines_never_press_a_button_that_allows(lines):
    """Whatever is typed at a card: a line is a message (its exact text) or a command for the
    gateway to read; the only button the terminal ever presses is the card's deny."""
    _, received, _, _ = _run_lines("".join(line + "\n" for line in lines), card=True)
    for inbound in received:
        if isinstance(inbound, ButtonPress):
            assert cards.parse_callback(inbound.data) == cards.CardTap("deny", "ap1")
        elif isinstance(inbound, InboundMessage):
            typed = inbound.text.strip()
            # "/x…" is a command; a bare "/" has no name and is an ordinary message
            assert inbound.text in lines and typed and not (typed.startswith("/") and len(typed) > 1)
        else:
            assert isinstance(inbound, InboundCommand)


def test_a_streamed_answer_prints_only_what_is_new_and_cards_end_by_their_last_line():
    async def go() -> tuple[str, str]:
        adapter, _, out, err = _adapter("")
        await adapter.start(adapter.start_with)  # type: ignore[attr-defined]
        sent = await adapter.send_text(CHAT, "Moutai")
        await adapter.edit_text(sent, "Moutai closed")
        await adapter.edit_text(sent, "Moutai closed higher.")
        progress = await adapter.send_text(CHAT, "⏳ read_file", format="plain")
        await adapter.edit_text(progress, "✓ read_file (0.1s)", format="plain")
        card = await adapter.send_card(CHAT, Card("t", "b", text="🔐 card"), buttons=BUTTONS)
        await adapter.edit_text(card, "🔐 write_file\n```\n{}\n```\n✅ Approved by you")
        await adapter.send_image(CHAT, "/tmp/chart.png")
        return out.getvalue(), err.getvalue()

    out, err = asyncio.run(go())
    assert out.count("Moutai") == 1 and "Moutai closed higher." in out
    assert err.splitlines() == [
        "⏳ read_file",
        "✓ read_file (0.1s)",
        "✅ Approved by you",
        "saved /tmp/chart.png",
    ]


def test_the_one_shot_and_the_interactive_terminal_are_the_same_user_and_chat():
    from bot import console_chat, terminal

    assert console_chat.TERMINAL_CHAT.key == terminal.TERMINAL_CHAT_KEY == "terminal"
    assert console_chat.TERMINAL_USER == terminal.TERMINAL_USER


def test_a_running_screen_is_one_line_until_it_ends_not_a_line_per_step():
    async def go() -> str:
        adapter, _, _out, err = _adapter("")
        await adapter.start(adapter.start_with)  # type: ignore[attr-defined]
        progress = await adapter.send_text(CHAT, "⏳ screen_stocks", format="plain")
        for pct in range(10, 90, 10):  # eight steps of one screen
            await adapter.edit_text(
                progress, f"⏳ screen_stocks: scanning {pct}% {pct * 50} stocks", format="plain"
            )
        await adapter.edit_text(
            progress, "⏳ screen_stocks: scanning 90%\n⏳ get_market_price", format="plain"
        )
        await adapter.edit_text(progress, "✓ screen_stocks (9.1s)\n✓ get_market_price (0.2s)", format="plain")
        return err.getvalue()

    assert asyncio.run(go()).splitlines() == [
        "⏳ screen_stocks",
        "⏳ get_market_price",
        "✓ screen_stocks (9.1s)",
        "✓ get_market_price (0.2s)",
    ]
