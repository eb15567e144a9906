"""The one place a command's context is made from the gateway: the chat's facts, `say()`, and the
narrow capabilities handlers may use (the gateway's internals stay behind these few methods)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from adapters.base import InboundCommand, SentMessage, UserRef
from agent import ApprovalError, TurnRecord
from bot.chats import ChatDirectory, ChatState
from bot.commands.context import CommandContext, CommandServices


class Lane(Protocol):
    @property
    def is_running(self) -> bool: ...

    def cancel(self) -> bool: ...


class Gateway(Protocol):
    """The few gateway methods the capabilities below use (no import of bot.gateway: no cycle)."""

    chats: ChatDirectory

    async def say(self, state: ChatState, text: str, fmt: str = "plain") -> SentMessage | None: ...

    def lane(self, state: ChatState) -> Lane: ...

    async def waiting_turn(self, state: ChatState) -> TurnRecord | None: ...

    def may_close(self, turn: TurnRecord, user_id: str) -> bool: ...

    async def move_on(self, state: ChatState, turn: TurnRecord) -> None: ...

    async def decide_by_command(
        self, state: ChatState, user: UserRef, approval_id: str, command: str
    ) -> ApprovalError | None: ...

    def run_skill(self, state: ChatState, text: str, user: UserRef) -> None: ...


@dataclass(frozen=True, slots=True)
class _Settings:
    gw: Gateway
    state: ChatState

    async def set_lang(self, lang: str) -> None:
        self.state.lang = lang
        await self.gw.chats.save(self.state)

    async def set_model(self, model: str | None) -> None:
        self.state.model = model
        await self.gw.chats.save(self.state)

    async def new_session(self) -> str:
        return await self.gw.chats.new_session(self.state)


@dataclass(frozen=True, slots=True)
class _Turns:
    gw: Gateway
    state: ChatState
    user: UserRef

    def is_running(self) -> bool:
        return self.gw.lane(self.state).is_running

    def stop_running(self) -> None:
        self.gw.lane(self.state).cancel()

    async def waiting(self) -> TurnRecord | None:
        return await self.gw.waiting_turn(self.state)

    def may_close(self, turn: TurnRecord) -> bool:
        return self.gw.may_close(turn, self.user.user_id)

    async def close_waiting(self, turn: TurnRecord) -> None:
        await self.gw.move_on(self.state, turn)

    async def decide(self, approval_id: str, command: str) -> ApprovalError | None:
        return await self.gw.decide_by_command(self.state, self.user, approval_id, command)

    def run_skill(self, text: str) -> None:
        self.gw.run_skill(self.state, text, self.user)


def bind(gw: Gateway, services: CommandServices, state: ChatState, cmd: InboundCommand) -> CommandContext:
    async def say(text: str) -> object:
        return await gw.say(state, text)

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
        settings=_Settings(gw, state),
        turn=_Turns(gw, state, cmd.user),
        services=services,
    )
