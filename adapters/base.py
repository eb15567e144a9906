"""The chat-adapter port: platform-neutral inbound values, outbound values and the `ChatAdapter` ABC.

`bot/` (the gateway) talks only to this module. Each platform module (`adapters/telegram.py`,
`adapters/discord.py`, the terminal adapter in `bot/`) turns its wire events into these values and
implements the outbound methods.

Contract for the handler given to `ChatAdapter.start(handler)`:
- It is awaited once per inbound event. Events of one chat are delivered in order, one at a time;
  different chats run concurrently.
- It should return as soon as the event is durably accepted (deduplicated, recorded, queued) — not
  after the whole model turn — because the adapter only confirms receipt to the platform (Telegram
  polling offset) after the handler returned. Events fetched but not handled before `stop()` are
  redelivered on the next start, so dedupe by `(platform, update_id)`.
- Exceptions raised by the handler are caught and logged by the adapter; they never stop it.
- A `ButtonPress` should be answered with `press.ack(...)` (or `adapter.answer_button`) inside the
  handler; if it was not, the adapter answers it silently after the handler returns.

Identifiers are strings on every platform (Telegram ints, Discord snowflakes), so they compare
equal to the string ids stored by `agent/ports.py` (`TurnRecord.requester`, `approvers`).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

from adapters.commandspec import CommandSpec, Completer

log = logging.getLogger(__name__)

TextFormat = Literal["markdown", "plain"]
ButtonStyle = Literal["primary", "secondary", "success", "danger"]

#: Telegram callback_data is 1–64 bytes; Discord custom_id is 1–100 chars and we add a 3-char prefix.
MAX_BUTTON_DATA_BYTES = 64


@dataclass(frozen=True, slots=True)
class ChatRef:
    """Where a message lives. Telegram forum topics and Discord threads are their own chats."""

    platform: str
    chat_id: str
    thread_id: str | None = None  # Telegram message_thread_id (forum topic); Discord thread channel id
    is_group: bool = False  # False for DMs / private chats
    title: str = field(default="", compare=False)

    @property
    def key(self) -> str:
        """Stable session key, e.g. "telegram:123", "telegram:-100987:topic7", "discord:300:thread555";
        a platform that is one chat (the terminal: empty `chat_id`) is keyed by its name, "terminal"."""
        if not self.chat_id and self.thread_id is None:
            return self.platform
        base = f"{self.platform}:{self.chat_id}"
        if self.thread_id is None:
            return base
        sep = "topic" if self.platform == "telegram" else "thread"
        return f"{base}:{sep}{self.thread_id}"


@dataclass(frozen=True, slots=True)
class UserRef:
    platform: str
    user_id: str
    display_name: str = ""
    language_code: str | None = None  # client language ("en", "zh-hans", Discord locale "zh-CN"), if known
    username: str | None = None
    is_bot: bool = False

    @property
    def key(self) -> str:
        return f"{self.platform}:{self.user_id}"


AckCallable = Callable[[str, bool], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class InboundMessage:
    update_id: str  # unique per platform: Telegram update_id, Discord message id
    chat: ChatRef
    user: UserRef
    text: str
    reply_to_message_id: str | None  # the message this one replies to (e.g. an approval card → "Edit")
    sent_at: datetime  # timezone-aware UTC
    message_id: str | None = None
    # True in DMs, and in groups when the bot is mentioned or the message replies to the bot.
    # In groups, ignore unaddressed messages unless a WaitingState is pending for that chat.
    addressed: bool = True
    reply_to_bot: bool = False


@dataclass(frozen=True, slots=True)
class InboundCommand:
    update_id: str
    chat: ChatRef
    user: UserRef
    name: str  # lower-case, without "/" and without "@botname"
    args: str  # raw text after the command name, stripped ("" if none)
    sent_at: datetime
    message_id: str | None = None
    # an answer only the sender sees (a Discord slash command: ephemeral), if the platform has one
    private_reply: AckCallable | None = field(default=None, compare=False, repr=False)

    @property
    def argv(self) -> list[str]:
        return self.args.split()


@dataclass(frozen=True, slots=True, eq=False)
class ButtonPress:
    update_id: str  # Telegram callback query id, Discord interaction id
    chat: ChatRef
    user: UserRef  # the presser (not the message author)
    data: str  # our short callback id, exactly as given to Button.data
    message_id: str | None  # the message carrying the button (None if Telegram says inaccessible)
    ack: AckCallable = field(repr=False)  # await press.ack(text, alert): answer the tap (once)
    sent_at: datetime | None = None


Inbound = InboundMessage | InboundCommand | ButtonPress
InboundHandler = Callable[[Inbound], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Button:
    label: str
    data: str  # ≤ 64 bytes UTF-8; a short random id looked up in the database
    style: ButtonStyle = "secondary"  # Discord only; Telegram ignores it

    def __post_init__(self) -> None:
        n = len(self.data.encode())
        if not 1 <= n <= MAX_BUTTON_DATA_BYTES:
            raise ValueError(f"button data must be 1-{MAX_BUTTON_DATA_BYTES} bytes, got {n}")


@dataclass(frozen=True, slots=True)
class Card:
    """A structured message (an approval card): Discord shows it as an embed; other platforms
    send `text`, which holds the same words as one markdown message."""

    title: str  # plain text
    body: str  # markdown
    fields: tuple[tuple[str, str], ...] = ()  # (name, markdown value)
    footer: str = ""  # plain text
    text: str = ""  # the whole card as one markdown message


@dataclass(frozen=True, slots=True)
class SentMessage:
    """A message the bot sent. When a long text was split, `message_id` is the LAST chunk (the one
    carrying the buttons) and `earlier_ids` the chunks before it."""

    chat: ChatRef
    message_id: str
    earlier_ids: tuple[str, ...] = ()


class DeliveryError(Exception):
    """Sending failed for good (bot blocked, chat gone, flood control still active after retries)."""

    def __init__(self, message: str, *, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class DeliveryUncertain(DeliveryError):
    """The request went out but its answer never came: it may or may not have been delivered, and
    the platform offers no way to ask (so it is not sent again)."""


class MessageGone(DeliveryError):
    """The message to edit no longer exists or can no longer be edited."""


class ChatAdapter(ABC):
    """One chat platform. All methods are coroutines on the caller's event loop."""

    platform: str = ""
    max_message_len: int = 4096
    #: minimum seconds between edits of one message while streaming (private / group chats)
    edit_interval: float = 1.0
    group_edit_interval: float = 3.0
    #: seconds between typing indicators while working (each lasts ~5 s on Telegram)
    typing_interval: float = 4.0
    #: the bot's own identity on this platform, known after `start()`
    me: UserRef | None = None
    #: a card's buttons can be tapped here (the terminal: answers are typed, so its hints say so)
    has_buttons: bool = True
    #: applied to every text before it is rendered and sent (message, edit, caption): the
    #: composition root sets the secret redactor here, the last wall before a chat
    outbound: Callable[[str], str] | None = None
    #: suggestions for an option with an autocomplete source (/model, time zones), set by the
    #: composition root; a platform that can show them asks it while the user types
    completer: Completer | None = None

    def _outgoing(self, text: str) -> str:
        return self.outbound(text) if self.outbound is not None and text else text

    @abstractmethod
    async def start(self, handler: InboundHandler) -> None:
        """Connect and begin delivering inbound events to `handler`; returns once running."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop receiving, let in-flight handlers finish (bounded), close connections. Idempotent.
        Never acknowledges events that were fetched but not handled."""

    @abstractmethod
    async def send_text(
        self,
        chat: ChatRef,
        text: str,
        *,
        buttons: Sequence[Sequence[Button]] | None = None,
        reply_to: str | None = None,
        format: TextFormat = "markdown",
    ) -> SentMessage:
        """Render, split at `max_message_len` and send; buttons go on the last chunk. Falls back to
        plain text when the platform rejects the formatting. Link previews are disabled."""

    @abstractmethod
    async def edit_text(
        self,
        msg: SentMessage,
        text: str,
        *,
        buttons: Sequence[Sequence[Button]] | None = None,
        format: TextFormat = "markdown",
    ) -> None:
        """Replace the text (and buttons; `None` removes them) of a sent message. Text over the limit
        is truncated with a marker (use `adapters.stream.StreamingMessage` for long streaming text).
        "Not modified" is not an error. Raises `MessageGone` if the message cannot be edited."""

    async def send_card(
        self, chat: ChatRef, card: Card, *, buttons: Sequence[Sequence[Button]] | None = None
    ) -> SentMessage:
        """Send a card; platforms without a richer form send its text. Editing the message later
        (`edit_text`) replaces the card by the text."""
        return await self.send_text(chat, card.text, buttons=buttons)

    @abstractmethod
    async def send_typing(self, chat: ChatRef) -> None:
        """Show the typing indicator (lasts ~5 s on Telegram, ~10 s on Discord). Never raises."""

    @abstractmethod
    async def send_image(self, chat: ChatRef, path: str | Path, caption: str = "") -> SentMessage: ...

    async def answer_button(self, press: ButtonPress, text: str = "", alert: bool = False) -> None:
        """Answer a tap: a toast (Telegram) / an ephemeral reply (Discord) if `text`, else silent."""
        await press.ack(text, alert)

    @abstractmethod
    async def set_commands(self, commands: Sequence[CommandSpec]) -> None:
        """Publish the commands (adapters/commandspec.py): the menu in each language, typed options
        where the platform has them. Discord syncs only when the set changed. Whatever the
        platform's shape of the arguments, they come back as `InboundCommand.args` text
        (`commandspec.args_text`)."""

    # Helpers shared by implementations -------------------------------------------------------

    def interval_for(self, chat: ChatRef) -> float:
        return self.group_edit_interval if chat.is_group else self.edit_interval
