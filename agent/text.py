"""Text that can always be encoded: lone surrogates out.

A JSON string may carry half of a UTF-16 surrogate pair ("\\ud83d", from a client that cut an
emoji in two, or a model stream split mid-pair); Python decodes it into a `str` that cannot be
encoded as UTF-8, so the first write to SQLite or the next request to the model fails — and
every later turn with it, since the text sits in the history. `scrub` is applied where text comes
in (platform adapters, the model stream, tool results) and by the message types themselves, so
such text is never stored.
"""

from __future__ import annotations

from typing import Any

REPLACEMENT = "\ufffd"


def scrub(text: str) -> str:
    """`text` with a surrogate pair written as two code points joined, and every lone
    surrogate replaced by U+FFFD. Text that encodes already is returned as it is."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def scrub_json(value: Any) -> Any:
    """`scrub` every string (keys too) in a JSON-like value."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub(k) if isinstance(k, str) else k: scrub_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(scrub_json(v) for v in value)
    return value
