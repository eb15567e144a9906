"""CurrentReferences: what "this / that / it / 这个 / 刚才那个" refers to.

Derived from the conversation itself — the newest stock, strategy, trader and file named by a tool
result's `refs`, a tool call's `path`, or a code the user typed — so there is no separate state to
keep in sync or lose on a restart. The runtime hands the result to the model with each turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from agent.memo import MessageMemo
from agent.messages import Message

KINDS = ("stock", "strategy", "trader", "file")
_CODE = re.compile(r"(?<![\d.])(?:(?:sh|sz)\s?)?(\d{6})(?:\.(?:SH|SZ|sh|sz))?(?!\d)")
_CRYPTO = re.compile(r"\b(BTC|ETH)(?:[-/]?USDT?)?\b", re.IGNORECASE)
SCAN_LIMIT = 80  # messages; older references are not "this" any more


def _from_result(content: str) -> dict[str, str]:
    if '"refs"' not in content:
        return {}
    try:
        data = json.loads(content)
    except ValueError:
        return {}
    refs = data.get("refs") if isinstance(data, dict) else None
    if not isinstance(refs, dict):
        return {}
    return {k: str(v) for k, v in refs.items() if k in KINDS and v not in (None, "")}


def current_references(messages: Sequence[Message]) -> dict[str, str]:
    found: dict[str, str] = {}
    for msg in reversed(messages[-SCAN_LIMIT:]):
        if len(found) == len(KINDS):
            break
        for k, v in _named_in(msg).items():
            found.setdefault(k, v)
    return found


def _references_of(msg: Message) -> dict[str, str]:
    """What one message names (the first of each kind in it). Read-only: it is remembered."""
    found: dict[str, str] = {}
    if msg.role == "tool":
        for r in msg.tool_results:
            for k, v in _from_result(r.content).items():
                found.setdefault(k, v)
    elif msg.role == "assistant":
        for call in msg.tool_calls:
            path = (call.arguments or {}).get("path")
            if isinstance(path, str) and path:
                found.setdefault("file", path)
    elif msg.role == "user" and not msg.meta.get("notification"):
        text = msg.text
        m = _CODE.search(text) or _CRYPTO.search(text)
        if m:
            found.setdefault("stock", m.group(1).upper())
    return found


# every model round scans up to SCAN_LIMIT messages of the history: each is read once
_named_in = MessageMemo(_references_of)


def render_references(refs: dict[str, str]) -> str:
    if not refs:
        return ""
    items = "; ".join(f"{k}={refs[k]}" for k in KINDS if k in refs)
    return (
        f'<current-references hint="what this/that/it/这个/刚才那个 refers to">{items}</current-references>'
    )
