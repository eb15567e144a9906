"""Secret redaction for traces, logs and tool output.

Redaction is hygiene, not a security boundary (a motivated output producer can defeat it): the
real controls are the allowlisted child environment and never handing secrets to the model. It
still keeps the common leaks — an API key in a trace, a bot token in an httpx log line, a password
pasted into chat — out of files on disk.

Three layers, applied together:
- values under sensitive *key names* (api_key, token, authorization, cookie, ...) → "***";
- any occurrence of a configured *secret value* (the keys and tokens tapebot loaded) → "***";
- well-known token *shapes* (sk-…, Telegram bot tokens, Bearer …, Discord, AWS, GitHub, JWT).
"""

from __future__ import annotations

import logging
import re
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

MASK = "***"
MIN_SECRET_LEN = 6

# Exact key names (normalised: lower case, '-' → '_') whose values are always masked.
SENSITIVE_KEYS = frozenset(
    {
        "api_key",
        "apikey",
        "x_api_key",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "auth_token",
        "bot_token",
        "session_token",
        "authorization",
        "proxy_authorization",
        "password",
        "passwd",
        "secret",
        "client_secret",
        "secret_key",
        "private_key",
        "cookie",
        "set_cookie",
        "webhook_secret",
    }
)
# Suffixes that make any key sensitive (telegram_bot_token, openai_api_key, db_password, ...).
# Note "_token" but not "_tokens": usage counters (input_tokens, max_tokens) must stay readable.
_SENSITIVE_SUFFIXES = ("_api_key", "_apikey", "_token", "_secret", "_password", "_passwd", "_private_key")


_KEY_VERDICTS: dict[str, bool] = {}  # keys repeat endlessly (traces, tool arguments): remember them


def is_sensitive_key(key: str) -> bool:
    verdict = _KEY_VERDICTS.get(key)
    if verdict is None:
        k = key.strip().lower().replace("-", "_")
        verdict = k in SENSITIVE_KEYS or k.endswith(_SENSITIVE_SUFFIXES)
        if len(_KEY_VERDICTS) >= 4096:  # arbitrary user keys must not grow it without bound
            _KEY_VERDICTS.clear()
        _KEY_VERDICTS[key] = verdict
    return verdict


# Token shapes. None contains whitespace and all are ≥ 15 characters, so they are only looked for
# inside long whitespace-free words: one C-speed split instead of a regex scan per shape over the
# whole text (tool results and traces are long; this runs in the hot loop).
_SHAPE_MIN_WORD = 15
_SHAPES: list[re.Pattern[str]] = [
    # Anthropic / OpenAI style keys (sk-ant-…, sk-proj-…, sk-…)
    re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}"),
    # Telegram bot tokens, also inside api.telegram.org/bot<token>/ URLs (no \b before the digits)
    re.compile(r"(?<![0-9])[0-9]{6,}:[A-Za-z0-9_\-]{30,}"),
    # JWTs (before the Discord shape, which they would otherwise partly match)
    re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    # Discord bot tokens: base64(user id).timestamp.hmac
    re.compile(r"\b[A-Za-z0-9_\-]{23,28}\.[A-Za-z0-9_\-]{6,7}\.[A-Za-z0-9_\-]{27,}"),
    # AWS access key ids
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    # GitHub, Slack, Google API keys
    re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"),
]
# Any shape at all, in one scan: most long words (ids, timestamps, URLs) match none.
_ANY_SHAPE = re.compile("|".join(f"(?:{p.pattern})" for p in _SHAPES))

# Contextual patterns: a sensitive name followed by its value ("Authorization: Bearer x",
# "api_key=x", '"password": "x"', "?token=x"). Names are found case-sensitively in the lower-cased
# text (a case-insensitive regex scan is ~4x slower), then the value is matched right after them.
_KV_NAME = re.compile(
    r"(?:authorization|api[_\-]?key|access[_\-]?token|auth[_\-]?token|bot[_\-]?token|refresh[_\-]?token|"
    r"secret|password|passwd|[?&;]token)"
)
_KV_NAME_ANY_CASE = re.compile(_KV_NAME.pattern, re.IGNORECASE)
_KV_HINTS = re.compile("authorization|key|token|secret|passw")  # cheap pre-check for _KV_NAME
_KV_VALUE = re.compile(
    r"[\"']?\s*[=:]\s*[\"']?(?:(?:bearer|basic|bot|token)\s+)?(?!\*\*\*)([^\s\"'&,;]+)", re.IGNORECASE
)
# "Bearer <token>" on its own; the token must be long so prose ("bearer bonds") survives.
_BEARER = re.compile(r"(\b[Bb]earer\s+)(?!\*\*\*)[A-Za-z0-9._~+/=\-]{20,}")


def _mask_named_values(s: str, lower: str) -> str:
    names = _KV_NAME.finditer(lower) if len(lower) == len(s) else _KV_NAME_ANY_CASE.finditer(s)
    out: list[str] = []
    last = 0
    for name in names:
        m = _KV_VALUE.match(s, name.end())
        if m is None or m.start(1) < last:
            continue
        out.append(s[last : m.start(1)])
        out.append(MASK)
        last = m.end(1)
    if not out:
        return s
    out.append(s[last:])
    return "".join(out)


def _sub_pattern(m: re.Match[str]) -> str:
    keep = m.groupdict().get("keep")
    return (keep or "") + MASK


class Redactor:
    """Masks secrets in text and in nested values. Cheap to call; safe to call twice."""

    def __init__(self, secret_values: Iterable[str] = (), *, extra_patterns: Iterable[str] = ()):
        self._secrets: list[str] = []  # longest first, so a secret containing another goes whole
        self._extra = [re.compile(p) for p in extra_patterns]
        self.add_secrets(secret_values)

    # -- configuration --------------------------------------------------------------------------
    def add_secrets(self, values: Iterable[str]) -> None:
        """Register more secret values (e.g. a token loaded after start-up)."""
        known = set(self._secrets)
        for raw in values:
            if not isinstance(raw, str):
                continue
            v = raw.strip()
            if len(v) < MIN_SECRET_LEN:
                continue  # too short to mask without mangling ordinary text
            known.update({v, urllib.parse.quote(v, safe="")})
        self._secrets = sorted(known, key=len, reverse=True)

    @property
    def secret_count(self) -> int:
        return len(self._secrets)

    # -- redaction ------------------------------------------------------------------------------
    def text(self, s: str) -> str:
        if not s or len(s) < MIN_SECRET_LEN:
            return s
        for secret in self._secrets:
            if secret in s:
                s = s.replace(secret, MASK)
        if len(s) >= _SHAPE_MIN_WORD:
            for word in {w for w in s.split() if len(w) >= _SHAPE_MIN_WORD}:
                if _ANY_SHAPE.search(word) is None:
                    continue
                masked = word
                for shape in _SHAPES:
                    masked = shape.sub(MASK, masked)
                if masked != word:
                    s = s.replace(word, masked)
        lower = s.lower()
        if _KV_HINTS.search(lower):
            s = _mask_named_values(s, lower)
        if "bearer" in lower:
            s = _BEARER.sub(r"\1" + MASK, s)
        for pat in self._extra:
            s = pat.sub(_sub_pattern, s)
        return s

    def value(self, obj: Any) -> Any:
        """Deep copy of `obj` with secrets masked: dict values under sensitive keys, header-style
        (name, value) pairs, and every string. Other leaf types are returned unchanged."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            out: dict[Any, Any] = {}
            for k, v in obj.items():
                if isinstance(k, str) and is_sensitive_key(k) and v not in (None, "", [], {}):
                    out[k] = MASK
                else:
                    out[k] = self.value(v)
            return out
        if isinstance(obj, list | tuple):
            if len(obj) == 2 and isinstance(obj[0], str) and is_sensitive_key(obj[0]):
                pair = (obj[0], MASK)
                return list(pair) if isinstance(obj, list) else pair
            items = [self.value(v) for v in obj]
            return items if isinstance(obj, list) else tuple(items)
        if isinstance(obj, set | frozenset):
            return [self.value(v) for v in obj]
        if isinstance(obj, bytes | bytearray):
            return obj  # callers decode first if they want bytes redacted
        return obj

    __call__ = text


class RedactingFilter(logging.Filter):
    """Redacts a log record in place: the formatted message (msg % args), the exception text and
    the stack text. Put it on *handlers* — a filter on the root logger itself does not see
    records propagated from child loggers (httpx, telegram, ...). `install_log_redaction`
    covers every record regardless of handlers."""

    def __init__(self, redactor: Redactor, name: str = ""):
        super().__init__(name)
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record, self.redactor)
        return True


def redact_record(record: logging.LogRecord, redactor: Redactor) -> None:
    if getattr(record, "_tapebot_redacted", False):
        return
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 — a broken format string must not break logging
        message = str(record.msg)
    record.msg = redactor.text(message)
    record.args = None
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redactor.text(record.exc_text)
        # Formatters append exc_text when set; dropping exc_info stops them re-rendering the
        # unredacted traceback (whose exception message may hold a token-bearing URL).
        record.exc_info = None
    if record.stack_info:
        record.stack_info = redactor.text(record.stack_info)
    record._tapebot_redacted = True


def install_log_redaction(redactor: Redactor) -> Callable[[], None]:
    """Redact every LogRecord at creation, whatever logger or handler it goes through.
    Returns a function that restores the previous record factory."""
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        redact_record(record, redactor)
        return record

    logging.setLogRecordFactory(factory)

    def uninstall() -> None:
        if logging.getLogRecordFactory() is factory:
            logging.setLogRecordFactory(previous)

    return uninstall
