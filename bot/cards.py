"""Approval cards and question prompts: what the user sees, and the buttons' callback data.

Arguments are shown canonically (sorted JSON), with control and bidi characters made visible so
a model cannot hide part of an action (e.g. U+202E reversing text), and truncated with a marker
and a hash of the full arguments when long — the hash is what the approval is bound to.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from adapters.base import Button
from agent.ports import ApprovalRecord, WaitingState
from agent.tools import sandbox
from agent.tools.workspace import LocalToolPolicy
from bot.i18n import t

MAX_ARGS_CHARS = 900
# Callback data: "<kind>:<id>" — kind a/o/d for always/once/deny, q<N> for question option N.
DECISIONS = {"o": "once", "a": "always", "d": "deny"}

_BIDI = {
    "\u202a",
    "\u202b",
    "\u202c",
    "\u202d",
    "\u202e",
    "\u2066",
    "\u2067",
    "\u2068",
    "\u2069",
    "\u200e",
    "\u200f",
    "\u061c",
}


def visible(text: str) -> str:
    """Make control, format and bidi characters visible as <U+hex> (e.g. <U+202E>)."""
    out = []
    for ch in text:
        if ch == "\n":
            out.append(ch)
        elif ch in _BIDI or unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs"):
            out.append(f"<U+{ord(ch):04X}>")
        else:
            out.append(ch)
    return "".join(out)


def render_arguments(arguments: dict[str, Any], args_hash: str) -> str:
    text = visible(json.dumps(arguments, ensure_ascii=False, sort_keys=True, indent=1))
    if len(text) > MAX_ARGS_CHARS:
        text = text[:MAX_ARGS_CHARS] + f"\n… [truncated; {len(text):,} chars, sha256 {args_hash[:16]}]"
    return text


def _code_block(text: str) -> str:
    return "```\n" + text.replace("```", "`\u200b``") + "\n```"


def approval_card(
    record: ApprovalRecord, lang: str, ttl_minutes: int, *, note: str = ""
) -> tuple[str, list[list[Button]]]:
    """`note`: one line on what the tool will be allowed to do (exec_command: its sandbox)."""
    body = (
        f"🔐 **{t(lang, 'approval_title')}** · `{record.id}`\n"
        f"{t(lang, 'approval_body', tool=record.tool)}\n"
        f"{_code_block(render_arguments(record.arguments, record.args_hash))}\n"
        + (f"{note}\n" if note else "")
        + f"_{t(lang, 'approval_hint', minutes=ttl_minutes)}_"
    )
    buttons = [
        [
            Button(t(lang, "btn_once"), f"o:{record.id}", "success"),
            Button(t(lang, "btn_always"), f"a:{record.id}", "primary"),
            Button(t(lang, "btn_deny"), f"d:{record.id}", "danger"),
        ]
    ]
    return body, buttons


def exec_note(policy: LocalToolPolicy, lang: str) -> str:
    """The exec_command card's line saying what its sandbox allows."""
    return t(lang, f"exec_{sandbox.mode(policy)}")


def approval_final(record: ApprovalRecord, lang: str, outcome: str, who: str) -> str:
    key = {
        "once": "approved_by",
        "always": "approved_always_by",
        "deny": "denied_by",
        "edit": "edit_by",
        "expired": "expired",
        "moved_on": "moved_on",
        "no_answer": "expired",
    }.get(outcome, "expired")
    return (
        f"🔐 {record.tool} · `{record.id}`\n"
        f"{_code_block(render_arguments(record.arguments, record.args_hash))}\n{t(lang, key, who=who)}"
    )


def question_prompt(waiting: WaitingState, turn_id: str) -> tuple[str, list[list[Button]]]:
    text = f"❓ {visible(waiting.question)}"
    if waiting.options:
        text += "\n" + "\n".join(f"{i}. {visible(o)}" for i, o in enumerate(waiting.options, 1))
    buttons = [[Button(o[:40], f"q{i}:{turn_id}")] for i, o in enumerate(waiting.options, 1)]
    return text, buttons


def parse_callback(data: str) -> tuple[str, str] | None:
    """("once"|"always"|"deny", approval_id) or ("q<N>", turn_id); None if malformed."""
    kind, sep, ident = data.partition(":")
    if not sep or not ident or len(data) > 64:
        return None
    if kind in DECISIONS:
        return DECISIONS[kind], ident
    if kind.startswith("q") and kind[1:].isdigit():
        return kind, ident
    return None
