"""The one place a command's context is made: the chat's facts, `say()`, and the narrow
capabilities handlers may use, over the chat parts themselves (the directory, the lanes, what the
chat waits on) rather than over the gateway."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from adapters.base import InboundCommand, UserRef
from agent import ApprovalError, TurnRecord
from bot.chats import ChatDirectory, ChatState
from bot.commands.context import CommandContext, CommandServices
from bot.waiting import may_close


class Lane(Protocol):
    @property
    def is_running(self) -> bool: ...

    def cancel(self) -> bool: ...

    def run_skill(self, text: str, user: UserRef) -> None: ...


class Lanes(Protocol):
    def of(self, state: ChatState) -> Lane: ...


class Waiting(Protocol):
    """What the chat waits on (bot/waiting.py), as commands see it."""

    async def waiting_turn(self, state: ChatState) -> TurnRecord | None: ...

    async def move_on(self, state: ChatState, turn: TurnRecord) -> None: ...

    async def decide_by_command(
        self, state: ChatState, user: UserRef, approval_id: str, command: str
    ) -> ApprovalError | None: ...


class Output(Protocol):
    """The chats (bot/chat_output.py), as commands see them."""

    async def say(self, state: ChatState, text: str) -> object:
        """A line into the chat."""
        ...


@dataclass(frozen=True, slots=True)
class CommandParts:
    """The chat parts a command reaches, handed over by the gateway once (no import of
    bot.gateway: no cycle)."""

    chats: ChatDirectory
    lanes: Lanes
    waiting: Waiting
    output: Output


@dataclass(frozen=True, slots=True)
class _Settings:
    chats: ChatDirectory
    state: ChatState

    async def set_lang(self, lang: str) -> None:
        self.state.lang = lang
        await self.chats.save(self.state)

    async def set_model(self, model: str | None) -> None:
        self.state.model = model
        await self.chats.save(self.state)

    async def new_session(self) -> str:
        return await self.chats.new_session(self.state)


@dataclass(frozen=True, slots=True)
class _Turns:
    parts: CommandParts
    state: ChatState
    user: UserRef

    def is_running(self) -> bool:
        return self.parts.lanes.of(self.state).is_running

    def stop_running(self) -> None:
        self.parts.lanes.of(self.state).cancel()

    async def waiting(self) -> TurnRecord | None:
        return await self.parts.waiting.waiting_turn(self.state)

    def may_close(self, turn: TurnRecord) -> bool:
        return may_close(turn, self.user.user_id)

    async def close_waiting(self, turn: TurnRecord) -> None:
        await self.parts.waiting.move_on(self.state, turn)

    async def decide(self, approval_id: str, command: str) -> ApprovalError | None:
        return await self.parts.waiting.decide_by_command(self.state, self.user, approval_id, command)

    def run_skill(self, text: str) -> None:
        self.parts.lanes.of(self.state).run_skill(text, self.user)


def bind(
    parts: CommandParts, services: CommandServices, state: ChatState, cmd: InboundCommand
) -> CommandContext:
    async def say(text: str) -> object:
        return await parts.output.say(state, text)

    return CommandContext(
        name=cmd.name,
        args=cmd.args,
        chat=state.chat,
        chat_key=state.key,
        session_id=state.session_id,
        lang=state.lang,
        model=state.model,
        user=cmd.user,
        say=say,
        settings=_Settings(parts.chats, state),
        turn=_Turns(parts, state, cmd.user),
        services=services,
    )
