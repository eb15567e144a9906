"""An MCP server's question to the user in the middle of a tool call (MCP "elicitation"), asked in
the chat the call came from.

The server's form is a flat object of strings, numbers, booleans and enums. Each field becomes
one question in the chat (enums and booleans with buttons), asked of the person whose turn made
the call, and answered by their next message or tap; "cancel" (取消) declines the whole form.
Nobody present (a scheduled run, a one-shot, an MCP client of our own) declines it; no answer in
time cancels it. URL-mode elicitation (go to a web page) is always declined: tapebot does not send
its users to third-party pages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent.tools.registry import ToolContext

ANSWER_TIMEOUT = 300.0  # seconds one answer may take
MAX_FIELDS = 6
CANCEL_WORDS = frozenset({"cancel", "stop", "decline", "no thanks", "取消", "算了", "不要"})


class LiveQuestions:
    """Asks the person in a chat one question while a tool call waits. This one asks nobody
    (where no chat is attached); the bot's `ChatQuestions` asks in the chat."""

    async def ask(
        self, chat_key: str, user_id: str, question: str, options: Sequence[str], timeout: float
    ) -> str | None:
        """Their answer, or None when none came in time (or nobody can be asked there)."""
        return None


@dataclass(frozen=True)
class FormAnswer:
    action: str  # "accept" | "decline" | "cancel"
    content: dict[str, Any] | None = None


def _field_question(server: str, message: str, name: str, prop: dict[str, Any], lang_hint: str = "") -> str:
    label = str(prop.get("title") or name)
    about = str(prop.get("description") or "")
    line = f"❓ {server}: {message}".rstrip()
    ask = f"{label}" + (f" — {about}" if about else "")
    kind = prop.get("type")
    if kind == "boolean":
        ask += " (yes / no)"
    elif kind in ("number", "integer"):
        ask += f" ({kind})"
    return f"{line}\n{ask}\n(“cancel” / 取消 to decline)"


def _options(prop: dict[str, Any]) -> list[str]:
    if isinstance(prop.get("enum"), list):
        return [str(v) for v in prop["enum"]][:8]
    one_of = prop.get("oneOf") or prop.get("anyOf")
    if isinstance(one_of, list) and all(isinstance(o, dict) and "const" in o for o in one_of):
        return [str(o["const"]) for o in one_of][:8]
    if prop.get("type") == "boolean":
        return ["yes", "no"]
    return []


def _coerce(prop: dict[str, Any], answer: str) -> tuple[bool, Any]:
    text = answer.strip()
    kind = prop.get("type")
    if kind == "boolean":
        low = text.lower()
        if low in ("yes", "y", "true", "是", "对", "好"):
            return True, True
        if low in ("no", "n", "false", "否", "不"):
            return True, False
        return False, None
    if kind in ("number", "integer"):
        try:
            value = float(text.replace(",", ""))
        except ValueError:
            return False, None
        if kind == "integer":
            if not value.is_integer():
                return False, None
            return True, int(value)
        return True, value
    options = _options(prop)
    if options and text not in options:
        return False, None
    return True, text


async def ask_form(
    asker: LiveQuestions | None,
    ctx: ToolContext | None,
    server: str,
    message: str,
    schema: dict[str, Any],
    *,
    timeout: float = ANSWER_TIMEOUT,
) -> FormAnswer:
    """Ask a form's fields one by one in the chat of `ctx`; what the person answered."""
    if asker is None or ctx is None or ctx.unattended or not ctx.chat_key:
        return FormAnswer("decline")
    props = schema.get("properties") or {}
    if not isinstance(props, dict) or len(props) > MAX_FIELDS:
        return FormAnswer("decline")
    required = set(schema.get("required") or [])
    content: dict[str, Any] = {}
    for name, prop in props.items():
        prop = prop if isinstance(prop, dict) else {}
        question = _field_question(server, message, name, prop)
        for attempt in range(2):  # one more try after an answer of the wrong kind
            answer = await asker.ask(ctx.chat_key, ctx.user_id, question, _options(prop), timeout)
            if answer is None:
                return FormAnswer("cancel")
            if answer.strip().lower() in CANCEL_WORDS:
                return FormAnswer("decline")
            if not answer.strip() and name not in required:
                break
            ok, value = _coerce(prop, answer)
            if ok:
                content[name] = value
                break
            if attempt == 1:
                return FormAnswer("decline")
            question = f"{question}\n⚠️ “{answer.strip()[:40]}” is not a valid {prop.get('type', 'answer')}."
    return FormAnswer("accept", content)
