"""The terminal as a chat: `tapebot chat` is one DM between the local user and the bot, driven
through the same gateway as Telegram and Discord.

    typed line   → InboundMessage (or InboundCommand when it starts with "/")
    Ctrl-C       → /cancel while a turn runs; at an approval card an explicit deny (its deny button)
    Ctrl-D,/exit → quit, once background work has finished and been reported

Lines are read one at a time, each once the previous one has settled (its turn ended or waits on
the user): the terminal is a conversation, not a queue. What was typed before an approval card or
a question appeared is discarded on a terminal: only what is typed after it counts, and
a line whose reading began before a card arrived (a background task's turn) is not used for it.
Line editing and history come from readline (history in TAPEBOT_HOME, mode 0600); output goes
above the prompt (adapters/console_screen.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import secrets
import signal
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from adapters.base import (
    Button,
    ButtonPress,
    Card,
    ChatAdapter,
    ChatRef,
    Inbound,
    InboundCommand,
    InboundHandler,
    InboundMessage,
    SentMessage,
    TextFormat,
    UserRef,
)
from adapters.commandspec import CommandSpec
from adapters.console_screen import Screen, default_streams, is_tty

log = logging.getLogger(__name__)

EXIT_WORDS = frozenset({"/exit", "/quit"})


@dataclass(frozen=True, slots=True)
class CardPrompt:
    """How the terminal shows an approval card: its words, the line the answer is typed on, the
    deny button's data (what Ctrl-C presses: never anything that could allow) and the note then."""

    text: str
    prompt: str
    deny: str | None
    interrupted: str = ""


@dataclass(frozen=True, slots=True)
class ConsoleHooks:
    """What the console needs from the bot side, as callables (the adapter knows no gateway)."""

    present_card: Callable[[Card, Sequence[Sequence[Button]]], Awaitable[CardPrompt]]
    settled: Callable[[], Awaitable[None]]  # returns once the chat's turn ended or waits on the user
    busy: Callable[[], bool]  # a turn is running now
    on_start: Callable[[], Awaitable[None]] | None = None
    on_quit: Callable[[], Awaitable[None]] | None = None  # background work finishes and is reported
    banner: str = ""
    idle_hint: str = "(Ctrl-D or /exit quits)"
    typed_before_hint: str = ""  # said when a line typed before a card is not used for it


class _Interrupted:
    """What a read returns after Ctrl-C at a card (or when its line is not used): no line."""


_INTERRUPTED = _Interrupted()


class ConsoleAdapter(ChatAdapter):
    platform = "terminal"
    max_message_len = 1_000_000  # no splitting: the terminal scrolls
    edit_interval = group_edit_interval = 0.1
    typing_interval = 1.0
    has_buttons = False  # a card is answered by typing yes / always / no

    def __init__(
        self,
        chat: ChatRef,
        user: UserRef,
        hooks: ConsoleHooks,
        *,
        history: Path | None = None,
        prompt: str = "you> ",
        streams: tuple[TextIO, TextIO, TextIO] | None = None,
    ):
        self.chat, self.user, self.hooks = chat, user, hooks
        self.me = UserRef(self.platform, "tapebot", "tapebot", is_bot=True)
        self.stdin, out, err = streams or default_streams()
        self.tty = is_tty(self.stdin) and is_tty(out)
        self.screen = Screen(out, err, tty=self.tty)
        self.screen.prompt_shown = lambda: self._prompt
        self.history, self.prompt = history, prompt
        self.commands: list[str] = []
        self._handler: InboundHandler | None = None
        self._ids = itertools.count(1)
        self._run_id = secrets.token_hex(4)  # update ids never repeat across runs (dedupe is durable)
        self._card: tuple[str, CardPrompt] | None = None  # (message id, prompt) of the waiting card
        self._question: str | None = None  # message id of a waiting question
        self._waiting_ids: set[str] = set()  # cards and questions not closed yet
        self._card_epoch = 0  # counts cards shown: a read begun before the latest one is stale
        self._reading: asyncio.Future[str | None] | None = None
        self._reading_epoch = 0
        self._prompt: str | None = None  # the prompt on screen while a line is read
        self._interrupt: asyncio.Future[None] | None = None
        self._typing_since_input = True  # nothing of the turn shown yet: the spinner may show
        self._stopped = False
        self._pending: set[asyncio.Future[None]] = set()

    # ---- lifecycle ---------------------------------------------------------------------------
    async def start(self, handler: InboundHandler) -> None:
        self._handler = handler
        if self.hooks.on_start is not None:
            await self.hooks.on_start()

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.screen.settle()
        self._save_history()

    async def run(self) -> int:
        """The conversation, until Ctrl-D or /exit; returns the exit code."""
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, self._on_sigint)
        self._setup_readline()
        if self.hooks.banner:
            self.screen.note(self.hooks.banner)
        try:
            while True:
                await self._settle()
                waiting = self._card[1].prompt if self._card else ("> " if self._question else None)
                line = await self._read(waiting or self.prompt, fresh=waiting is not None)
                if isinstance(line, _Interrupted):
                    continue
                if line is None:  # Ctrl-D, or the end of piped input: silence answers no card
                    if self._card is not None:
                        await self._deny_card()
                        continue
                    self.screen.end_prompt()  # what is said while quitting starts below the prompt
                    break
                text = line.strip()
                if text in EXIT_WORDS:
                    if self._card is not None or self._question is not None:
                        await self._send(self._command("cancel", ""))  # closes it unrun
                        await self._settle()
                    break
                if not text:
                    if self._card is not None:
                        await self._deny_card()  # an empty answer is a no, as before
                    continue
                self._typing_since_input = True
                if text.startswith("/") and len(text) > 1:
                    name, _, args = text[1:].partition(" ")
                    await self._send(self._command(name.lower(), args.strip()))
                else:
                    await self._send(self._message(line))
            if self.hooks.on_quit is not None:
                await self.hooks.on_quit()
            await self._settle()
            return 0
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
            await self.stop()

    async def _settle(self) -> None:
        while self._pending:  # what Ctrl-C sent is handled first
            await asyncio.gather(*self._pending, return_exceptions=True)
        await self.hooks.settled()
        self.screen.settle()

    # ---- inbound -----------------------------------------------------------------------------
    def _next_id(self) -> str:
        return f"{self._run_id}-{next(self._ids)}"

    def _message(self, text: str) -> InboundMessage:
        return InboundMessage(
            self._next_id(), self.chat, self.user, text, None, datetime.now(UTC), self._next_id()
        )

    def _command(self, name: str, args: str) -> InboundCommand:
        return InboundCommand(self._next_id(), self.chat, self.user, name, args, datetime.now(UTC))

    async def _send(self, inbound: Inbound) -> None:
        assert self._handler is not None, "start() first"
        try:
            await self._handler(inbound)
        except Exception:  # the contract: a failing handler never stops the adapter
            log.exception("handling %s failed", type(inbound).__name__)

    def _deny_card(self) -> Awaitable[None]:
        """An explicit deny of the waiting card: its deny button, pressed. The card is taken at
        once (the next prompt is not its prompt any more); the press is sent by the awaitable."""
        taken, self._card = self._card, None

        async def press() -> None:
            if taken is None or taken[1].deny is None:
                return
            await self._send(
                ButtonPress(
                    self._next_id(), self.chat, self.user, taken[1].deny, taken[0], self._ack,
                    datetime.now(UTC),
                )
            )  # fmt: skip

        return press()

    async def _ack(self, text: str, alert: bool) -> None:
        if text:
            self.screen.note(self._outgoing(text))

    def _on_sigint(self) -> None:
        if self._card is not None:  # a card waits: a no, said as such (never a cancel of it)
            self._prompt = None  # its prompt is done with: not redrawn under the note
            if self._card[1].interrupted:
                self.screen.note(self._card[1].interrupted)
            self._wake(self._deny_card())
        elif self.hooks.busy():  # a turn runs: the chats' /cancel
            self._wake(self._send(self._command("cancel", "")))
        else:
            self.screen.note(self.hooks.idle_hint)

    def _wake(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._pending.add(task)  # kept until done (the loop holds tasks weakly)
        task.add_done_callback(self._pending.discard)
        if self._interrupt is not None and not self._interrupt.done():
            self._interrupt.set_result(None)

    # ---- reading lines -----------------------------------------------------------------------
    def _setup_readline(self) -> None:
        if not self.tty:
            return
        try:
            import readline
        except ImportError:  # no line editing here; input() still works
            return
        if self.history is not None and self.history.exists():
            with contextlib.suppress(OSError):
                readline.read_history_file(self.history)
        readline.set_completer(self._complete)
        readline.parse_and_bind("tab: complete")

    def _complete(self, text: str, state: int) -> str | None:
        if not text.startswith("/"):
            return None
        options = [f"/{c}" for c in [*self.commands, "exit"] if f"/{c}".startswith(text)]
        return options[state] if state < len(options) else None

    def _save_history(self) -> None:
        if not self.tty or self.history is None:
            return
        try:
            import readline

            ensure_private(self.history)
            readline.set_history_length(1000)
            readline.write_history_file(self.history)
        except (ImportError, OSError) as exc:
            log.debug("history not saved: %s", exc)

    def _flush_typed_ahead(self) -> None:
        if self.tty:  # piped input is a script: nothing to discard
            flush_typed_ahead(self.stdin)

    async def _read(self, prompt: str, *, fresh: bool) -> str | _Interrupted | None:
        """One line (None at the end of input, _INTERRUPTED after Ctrl-C at a card). A read left
        behind by an interrupted prompt is taken over, never doubled; a line whose reading began
        before the card now waiting appeared is not used for it."""
        loop = asyncio.get_running_loop()
        if fresh:
            self._flush_typed_ahead()
        if self._reading is None:
            self._reading = loop.create_future()
            self._reading_epoch = self._card_epoch
            self._start_reader(prompt, self._reading)
        else:
            self.screen.out.write(prompt)
            self.screen.out.flush()
        self._prompt = prompt
        self._interrupt = loop.create_future()
        reading = self._reading
        try:
            waiting: set[asyncio.Future[Any]] = {reading, self._interrupt}
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._prompt = None
        if not reading.done():
            return _INTERRUPTED
        self._reading = None
        line = reading.result()
        asked = self._card is not None or self._question is not None
        if asked and self._reading_epoch != self._card_epoch and line:
            # typed at another prompt before this card existed: not an answer to it
            self.screen.note(self.hooks.typed_before_hint.format(line=line.strip()[:60]))
            return _INTERRUPTED
        return line

    def _start_reader(self, prompt: str, future: asyncio.Future[str | None]) -> None:
        loop = asyncio.get_running_loop()
        stdin, out = self.stdin, self.screen.out

        def read() -> None:
            try:
                line: str | None = (
                    input(prompt) if stdin is default_streams()[0] else _read_from(stdin, out, prompt)
                )
            except EOFError:
                line = None
            except (OSError, ValueError):  # a closed stream: the end of input
                line = None

            def deliver() -> None:
                if not future.done():
                    future.set_result(line)

            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(deliver)

        # a daemon thread: one blocked in input() never holds the process at exit
        threading.Thread(target=read, name="console-input", daemon=True).start()

    # ---- outbound ----------------------------------------------------------------------------
    def _sent(self) -> SentMessage:
        return SentMessage(self.chat, f"m{next(self._ids)}")

    async def send_text(
        self,
        chat: ChatRef,
        text: str,
        *,
        buttons: Sequence[Sequence[Button]] | None = None,
        reply_to: str | None = None,
        format: TextFormat = "markdown",
    ) -> SentMessage:
        sent = self._sent()
        text = self._outgoing(text)
        self._typing_since_input = False
        if buttons:  # a question with options: answered by typing one (its number or its words)
            self._question = sent.message_id
            self._waiting_ids.add(sent.message_id)
            self._card_epoch += 1
            self.screen.block(text)
            return sent
        self.screen.message(sent.message_id, text, answer=format == "markdown")
        return sent

    async def edit_text(
        self,
        msg: SentMessage,
        text: str,
        *,
        buttons: Sequence[Sequence[Button]] | None = None,
        format: TextFormat = "markdown",
    ) -> None:
        text = self._outgoing(text)
        if msg.message_id in self._waiting_ids:  # a card or question decided, answered or closed
            self._waiting_ids.discard(msg.message_id)
            if self._card is not None and msg.message_id == self._card[0]:
                self._card = None
            if msg.message_id == self._question:
                self._question = None
            self.screen.note(text.strip().splitlines()[-1])  # its last line says how it ended
            return
        self._typing_since_input = False
        self.screen.edit(msg.message_id, text, answer=format == "markdown")

    async def send_card(
        self, chat: ChatRef, card: Card, *, buttons: Sequence[Sequence[Button]] | None = None
    ) -> SentMessage:
        sent = self._sent()
        shown = await self.hooks.present_card(card, buttons or [])
        self._typing_since_input = False
        self._card = (sent.message_id, shown)
        self._waiting_ids.add(sent.message_id)
        self._card_epoch += 1
        self.screen.block(self._outgoing(shown.text))
        return sent

    async def send_typing(self, chat: ChatRef) -> None:
        if self._typing_since_input:
            self.screen.spin()

    async def send_image(self, chat: ChatRef, path: str | Path, caption: str = "") -> SentMessage:
        self.screen.note(f"saved {path}" + (f"\n  {self._outgoing(caption)}" if caption else ""))
        return self._sent()

    async def set_commands(self, commands: Sequence[CommandSpec]) -> None:
        self.commands = [c.name for c in commands]


def flush_typed_ahead(stream: Any) -> None:
    """Discard what was typed before a prompt appeared (a tty only)."""
    import termios

    try:
        if stream.isatty():
            termios.tcflush(stream.fileno(), termios.TCIFLUSH)
    except (OSError, ValueError, termios.error):
        pass


def _read_from(stream: TextIO, out: TextIO, prompt: str) -> str:
    """input() for a stream that is not the process's stdin (tests)."""
    out.write(prompt)
    out.flush()
    line = stream.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")


def ensure_private(path: Path) -> None:
    """The history file is created private (mode 0600): typed lines can be sensitive."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.close(fd)
        os.chmod(path, 0o600)
