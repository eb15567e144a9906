"""Keep bot tokens out of logs.

The Telegram token is part of every Bot API URL (`/bot<token>/method`), so HTTP client logs and some
exception texts carry it. We (1) silence request logging of httpx/httpcore/aiohttp, and (2) attach a
redacting filter to every handler of the root logger and of the library loggers, which rewrites the
formatted message, the exception text and the stack text of each record.

Call `install_redaction(token)` after logging is configured (adapters call it again on start; it is
idempotent and adds secrets to the filter already installed).
"""

from __future__ import annotations

import logging

NOISY_LOGGERS = (
    "httpx",
    "httpcore",
    "telegram",
    "telegram.ext",
    "aiohttp.access",
    "discord.http",
    "discord.gateway",
)
_MASK = "[REDACTED]"


class RedactingFilter(logging.Filter):
    def __init__(self, secrets: set[str] | None = None):
        super().__init__()
        self.secrets: set[str] = set(secrets or ())

    def redact(self, text: str) -> str:
        for s in self.secrets:
            if s and s in text:
                text = text.replace(s, _MASK)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001 — a broken format string must not break logging
            msg = str(record.msg)
        red = self.redact(msg)
        if red != msg or record.args:
            record.msg, record.args = red, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


def _filter_of(handler: logging.Handler) -> RedactingFilter:
    for f in handler.filters:
        if isinstance(f, RedactingFilter):
            return f
    f = RedactingFilter()
    handler.addFilter(f)
    return f


def install_redaction(*secrets: str, quiet: bool = True) -> None:
    """Redact `secrets` in every record reaching the handlers of the root and library loggers."""
    secrets_set = {s for s in secrets if s and len(s) >= 6}
    if quiet:
        for name in NOISY_LOGGERS:
            lg = logging.getLogger(name)
            if lg.level == logging.NOTSET or lg.level < logging.WARNING:
                lg.setLevel(logging.WARNING)
    loggers = [logging.getLogger(), *(logging.getLogger(n) for n in NOISY_LOGGERS)]
    handlers = {h for lg in loggers for h in lg.handlers}
    if logging.lastResort is not None:
        handlers.add(logging.lastResort)
    for h in handlers:
        _filter_of(h).secrets |= secrets_set
    # records logged directly on these loggers are filtered before any handler sees them
    for lg in loggers[1:]:
        for f in lg.filters:
            if isinstance(f, RedactingFilter):
                f.secrets |= secrets_set
                break
        else:
            lg.addFilter(RedactingFilter(secrets_set))
