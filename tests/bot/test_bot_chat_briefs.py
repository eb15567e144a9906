"""A scheduled brief reaches its chat through one object, `ChatBriefs`: the market data's line,
then the unattended turn in the chat's lane once the chat is held here. A brief it cannot deliver
raises `DeliveryError` (the scheduler retries it) and runs nothing: an unknown chat, a platform
this process does not serve, a chat another replica keeps busy."""

from __future__ import annotations

import pytest

from adapters.base import ChatRef, DeliveryError
from bot.briefs import ChatBriefs
from bot.chats import ChatState

CHAT = ChatRef("telegram", "42")
STATE = ChatState(CHAT.key, CHAT, "s1", lang="zh")


class Chat:
    """The chat's directory, output, lane and hold in one, recording what the brief did."""

    def __init__(self, *, served: bool = True, held: bool = True) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.served = served
        self.held = held

    async def by_key(self, chat_key: str) -> ChatState | None:
        return STATE if chat_key == STATE.key else None

    def serves(self, state: ChatState) -> bool:
        return self.served

    async def say(self, state: ChatState, text: str) -> None:
        self.calls.append(("say", state.key, text))

    async def hold(self, state: ChatState) -> bool:
        self.calls.append(("hold", state.key))
        return self.held

    def of(self, state: ChatState) -> Chat:
        return self

    async def run_brief(self, text: str) -> None:
        self.calls.append(("brief", text))


async def data_line(lang: str) -> str:
    return f"data as of yesterday ({lang})"


def briefs(chat: Chat, line: object = data_line) -> ChatBriefs:
    return ChatBriefs(chat, chat, chat, chat, data_line=line)  # type: ignore[arg-type]


async def test_the_data_line_then_the_brief_in_the_chats_lane():
    chat = Chat()
    await briefs(chat).deliver(STATE.key, "Morning brief")
    assert chat.calls == [
        ("say", STATE.key, "data as of yesterday (zh)"),
        ("hold", STATE.key),
        ("brief", "Morning brief"),
    ]


async def test_without_market_data_or_its_line_only_the_brief():
    async def empty(lang: str) -> str:
        return ""

    for line in (None, empty):
        chat = Chat()
        await briefs(chat, line).deliver(STATE.key, "Morning brief")
        assert chat.calls == [("hold", STATE.key), ("brief", "Morning brief")]


@pytest.mark.parametrize(
    ("chat_key", "chat", "why"),
    [
        ("telegram:7", Chat(), "not reachable"),
        (STATE.key, Chat(served=False), "not reachable"),
        (STATE.key, Chat(held=False), "busy on another replica"),
    ],
)
async def test_a_brief_that_cannot_be_delivered_raises_and_runs_nothing(chat_key, chat, why):
    with pytest.raises(DeliveryError, match=why):
        await briefs(chat).deliver(chat_key, "Morning brief")
    assert ("brief", "Morning brief") not in chat.calls
