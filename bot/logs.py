"""Where log lines go: stderr always, and a rotated file when `[log] file` or `--log-file` asks.

Third-party libraries log chatter at INFO that says nothing to an operator (alembic's seven
"setup plugin" lines and its "Context impl" pair at every start, request lines that would show
URLs with the bot token, discord.py's voice-support warning for a bot that never joins voice);
they are kept at WARNING unless the level is DEBUG. Migrations that ran are still reported, once,
by memory.db."""

from __future__ import annotations

import logging
import logging.handlers
import os
from pathlib import Path

from config.errors import ConfigError

FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
QUIET_LOGGERS = (
    "httpx",
    "httpcore",
    "telegram",
    "discord",
    "apscheduler",
    "aiohttp.access",
    "alembic",
    "mcp",
    "openai",
    "anthropic",
    "asyncio",
)
_FILE_HANDLER_NAME = "tapebot-file"


def configure_logging(
    level: str = "INFO",
    *,
    file: Path | None = None,
    max_bytes: int = 10_000_000,
    backups: int = 5,
    console: bool = True,
) -> None:
    """Idempotent: a second call changes the level and the file, never doubles the handlers."""
    root = logging.getLogger()
    numeric = logging.getLevelName(level.upper())
    numeric = numeric if isinstance(numeric, int) else logging.INFO
    formatter = logging.Formatter(FORMAT)
    if console and not any(type(h) is logging.StreamHandler for h in root.handlers):
        stream = logging.StreamHandler()
        stream.setFormatter(formatter)
        root.addHandler(stream)
    for h in [h for h in root.handlers if h.get_name() == _FILE_HANDLER_NAME]:
        root.removeHandler(h)
        h.close()
    if file is not None:
        root.addHandler(_file_handler(file, max_bytes, backups, formatter))
    root.setLevel(numeric)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(
            max(logging.WARNING, numeric) if numeric > logging.DEBUG else numeric
        )
    _silence_voice_warning()


class _PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """Every file it opens, the first and each one after a rotation, is created 0600: logs are
    redacted but still name chats and users."""

    def _open(self):  # type: ignore[no-untyped-def]
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)


def _file_handler(file: Path, max_bytes: int, backups: int, formatter: logging.Formatter) -> logging.Handler:
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        handler = _PrivateRotatingFileHandler(file, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot write the log file {file}: {exc.strerror or exc}",
            key="log.file",
            fix="choose a writable path ([log] file or --log-file)",
        ) from None
    handler.set_name(_FILE_HANDLER_NAME)
    handler.setFormatter(formatter)
    return handler


class _DropVoiceWarning(logging.Filter):
    """discord.py warns once per process that voice is unsupported (PyNaCl/davey missing); tapebot
    never joins voice, so the warning is noise at every start."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "voice will NOT be supported" not in str(record.msg)


def _silence_voice_warning() -> None:
    lg = logging.getLogger("discord.client")
    if not any(isinstance(f, _DropVoiceWarning) for f in lg.filters):
        lg.addFilter(_DropVoiceWarning())
