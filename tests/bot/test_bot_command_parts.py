"""Commands reach the chat parts (the directory, the lanes, what the chat waits on), not the
gateway: `bind` works over a `CommandParts` with no gateway at all, and the gateway keeps no
method that only forwards to them. The console's allow-list is built with the gateway, not
written into it by the terminal."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

from adapters.base import ChatRef, InboundCommand, UserRef
from bot.access import TERMINAL_USER, terminal_access
from bot.chats import ChatState
from bot.commands.binding import CommandParts, bind
from bot.gateway import Gateway

ROOT = Path(__file__).resolve().parents[2]
CHAT = ChatRef("telegram", "42")
ALICE = UserRef("telegram", "7")


class Recorder:
    """Each part records what the command asked of it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.is_running = True

    # a lane
    def of(self, state: ChatState) -> Recorder:
        self.calls.append(("of", state.key))
        return self

    def cancel(self) -> bool:
        self.calls.append(("cancel",))
        return True

    def run_skill(self, text: str, user: UserRef) -> None:
        self.calls.append(("run_skill", text, user.user_id))

    # what the chat waits on
    async def waiting_turn(self, state: ChatState) -> None:
        self.calls.append(("waiting_turn", state.key))

    async def move_on(self, state: ChatState, turn: object) -> None:
        self.calls.append(("move_on", state.key, str(turn)))

    async def decide_by_command(
        self, state: ChatState, user: UserRef, approval_id: str, command: str
    ) -> None:
        self.calls.append(("decide", approval_id, command, user.user_id))

    # the directory
    async def save(self, state: ChatState) -> None:
        self.calls.append(("save", state.lang))

    async def say(self, state: ChatState, text: str) -> None:
        self.calls.append(("say", state.key, text))


async def test_a_command_context_needs_only_the_chat_parts():
    rec = Recorder()
    parts = CommandParts(chats=rec, lanes=rec, waiting=rec, output=rec)  # type: ignore[arg-type]
    state = ChatState(CHAT.key, CHAT, "s1")
    cmd = InboundCommand("u1", CHAT, ALICE, "skill", "", datetime(2026, 12, 6, tzinfo=UTC))
    ctx = bind(parts, None, state, cmd)  # type: ignore[arg-type]
    await ctx.say("hello")
    assert ctx.turn.is_running()
    ctx.turn.stop_running()
    ctx.turn.run_skill("do it")
    await ctx.turn.waiting()
    await ctx.turn.close_waiting("turn-1")  # type: ignore[arg-type]
    await ctx.turn.decide("a1", "approve")
    await ctx.settings.set_lang("zh")
    assert rec.calls == [
        ("say", CHAT.key, "hello"),
        ("of", CHAT.key),
        ("of", CHAT.key),
        ("cancel",),
        ("of", CHAT.key),
        ("run_skill", "do it", "7"),
        ("waiting_turn", CHAT.key),
        ("move_on", CHAT.key, "turn-1"),
        ("decide", "a1", "approve", "7"),
        ("save", "zh"),
    ]


def test_the_gateway_keeps_no_forwarding_methods_for_commands():
    for name in ("may_close", "move_on", "decide_by_command", "run_skill"):
        assert not hasattr(Gateway, name), name


def test_the_terminal_user_is_let_in_by_the_access_it_is_built_with():
    acc = terminal_access(30.0)
    assert acc.allowed_users == {TERMINAL_USER} and acc.admins == {TERMINAL_USER}
    assert acc.max_backlog_age_s == 630.0
    # nothing in bot/ writes into a gateway's allow-lists after it is built
    for path in sorted((ROOT / "bot").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Attribute):
                        assert target.value.attr != "platforms", f"{path}:{node.lineno}"
