"""What the console adapter writes: answers on stdout, everything else on stderr, and on a terminal
a spinner until the first output of a turn and answers rendered as Markdown (rich).

A streamed answer arrives as repeated edits of one message: when the new text extends what is
shown, only the new part is written (pipes, and a terminal while the answer grows); on a terminal
the answer is then shown rendered (`rich`, imported only here and only on a terminal). An edit
that is no extension (a progress line ⏳ → ✓) writes the lines that changed. While a line is being
read, output goes above the prompt, which is redrawn with what was typed so far (readline).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

RUNNING = "⏳"


def _progress_key(line: str) -> str:
    """A progress line's tool (and task id): what stays the same while it runs."""
    return line.split(":", 1)[0].split(" (", 1)[0].strip()


class Screen:
    def __init__(self, out: TextIO, err: TextIO, *, tty: bool, spinner_text: str = "…"):
        self.out, self.err, self.tty = out, err, tty
        self.spinner_text = spinner_text
        self._shown: dict[str, str] = {}  # message id -> the text written for it so far
        self._open: str | None = None  # the message whose text ends the output (mid-line)
        self._midline = False
        self._spinner: Any = None  # a rich Status while nothing of the turn is shown yet
        self._live: Any = None  # (message id, rich Live) of the answer being streamed
        self._live_id: str | None = None
        self.prompt_shown: Callable[[], str | None] = lambda: None  # the prompt being read, if any
        self._lock = threading.Lock()
        self._console: Any = None

    # ---- terminal niceties (rich) ------------------------------------------------------------
    def _rich(self) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self.out, soft_wrap=False, highlight=False)
        return self._console

    def spin(self) -> None:
        """The turn is working and has shown nothing yet: a spinner (terminal only)."""
        if not self.tty or self._spinner is not None or self._live is not None:
            return
        self._end_line()
        self._spinner = self._rich().status(self.spinner_text, spinner="dots")
        self._spinner.start()

    def _stop_spinner(self) -> None:
        if self._spinner is not None:
            with contextlib.suppress(Exception):
                self._spinner.stop()
            self._spinner = None

    def _stop_live(self) -> None:
        if self._live is not None:
            with contextlib.suppress(Exception):
                self._live.stop()
            self._live = None
            self._live_id = None
            self._open = None
            self._midline = False

    def settle(self) -> None:
        """The turn settled (ended, or waits on the user): the rendered answer stays as it is."""
        self._stop_spinner()
        self._stop_live()
        self._end_line()

    def end_prompt(self) -> None:
        """The input ended at a prompt (Ctrl-D, end of piped input): the cursor is still after the
        prompt, which no newline ended; later output starts on a line of its own."""
        with self._lock:
            self.out.write("\n")
            self.out.flush()
            self._midline, self._open = False, None

    # ---- writing -----------------------------------------------------------------------------
    def _end_line(self) -> None:
        if self._midline:
            self.out.write("\n")
            self.out.flush()
            self._midline = False
        self._open = None

    def _above_prompt(self, stream: TextIO, text: str) -> None:
        """Write whole lines; while a prompt is shown on a terminal, above it (then redrawn)."""
        prompt = self.prompt_shown() if self.tty else None
        if prompt is not None:
            stream.write("\r\x1b[K")
        stream.write(text if text.endswith("\n") else text + "\n")
        stream.flush()
        if prompt is not None:
            typed = ""
            with contextlib.suppress(Exception):
                import readline

                typed = readline.get_line_buffer()
            self.out.write(prompt + typed)
            self.out.flush()

    def note(self, text: str) -> None:
        """A line that is not an answer (progress, command replies, saved files, log lines)."""
        with self._lock:
            self._stop_spinner()
            self._stop_live()
            self._end_line()
            self._above_prompt(self.err, text)

    def block(self, text: str) -> None:
        """A whole message on stdout (a card, a question)."""
        with self._lock:
            self._stop_spinner()
            self._stop_live()
            self._end_line()
            self._above_prompt(self.out, text)

    def message(self, message_id: str, text: str, *, answer: bool) -> None:
        """A new message (answer: stdout, streamed and rendered; else a note)."""
        if not answer:
            self._shown[message_id] = text
            self.note(text)
            return
        with self._lock:
            self._stop_spinner()
            self._stop_live()
            self._end_line()
            self._shown[message_id] = text
            if self.tty and self.prompt_shown() is None:
                self._start_live(message_id, text)
                return
            self.out.write(text)
            self.out.flush()
            self._open, self._midline = message_id, not text.endswith("\n")
            if self.prompt_shown() is not None:
                self._end_line()

    def edit(self, message_id: str, text: str, *, answer: bool) -> None:
        old = self._shown.get(message_id)
        if old is None:
            self.message(message_id, text, answer=answer)
            return
        if text == old:
            return
        with self._lock:
            self._shown[message_id] = text
            if answer and self._live_id == message_id:
                self._live.update(self._markdown(text), refresh=True)
                return
            if answer and self._open == message_id and text.startswith(old):
                self.out.write(text[len(old) :])  # a streamed answer grows: only the new part
                self.out.flush()
                self._midline = not text.endswith("\n")
                return
        # something else: the lines that changed (a progress line ⏳ → ✓, a card's final state);
        # a running line that only moves on ("⏳ screen_stocks: 30%" → "40%") is not written
        # again: a screen shows its start and its outcome, not a line per step
        before = set(old.splitlines())
        running = {_progress_key(line) for line in before if line.startswith(RUNNING)}
        changed = [
            line
            for line in text.splitlines()
            if line not in before
            and line.strip()
            and not (line.startswith(RUNNING) and _progress_key(line) in running)
        ]
        if changed:
            (self.block if answer else self.note)("\n".join(changed))

    def _markdown(self, text: str) -> Any:
        from rich.markdown import Markdown

        return Markdown(text)

    def _start_live(self, message_id: str, text: str) -> None:
        from rich.live import Live

        self._live = Live(
            self._markdown(text),
            console=self._rich(),
            auto_refresh=False,
            vertical_overflow="visible",
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live.start(refresh=True)
        self._live_id = message_id


def is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def default_streams() -> tuple[TextIO, TextIO, TextIO]:
    return sys.stdin, sys.stdout, sys.stderr


class ConsoleLogHandler(logging.Handler):
    """Log lines (warnings and worse) above the prompt rather than through it."""

    def __init__(self, screen: Screen, level: int = logging.WARNING):
        super().__init__(level)
        self.screen = screen

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.screen.note(f"{record.levelname.lower()}: {self.format(record)}")
        except Exception:  # noqa: BLE001 — logging never breaks the conversation (logging's own rule)
            self.handleError(record)
