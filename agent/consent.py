"""Consent: the one decision function every surface uses, and the scope of standing approvals.

Every way of answering an approval card — a button, a typed reply in a chat, `/approve` and
`/deny`, the terminal prompt — is read by `read_consent`, so the same words mean the same thing
everywhere. Only the Allow button, `/approve <id>` or a word from the short `AFFIRMATIVE` list
allows; `STANDING` words ask for "Always allow" where it is offered. Everything else (option
numbers, "deny", questions, unknown words, emoji) is a denial or unclear, never an allow.

Normalisation is deliberately narrow: surrounding whitespace and trailing punctuation go, ASCII
letters are lower-cased, runs of spaces become one. No Unicode folding, so a look-alike (a Kelvin
sign for "k", full-width letters) is an unknown word, not "ok".

A question is never consent: a reply carrying a question mark of any script ("yes?", "可以？",
"ok‽"), a question particle ("可以吗", "好不好", "是吧") or an English question form ("really",
"is it ok", "are you sure") is read by `asks` first and can only be unclear (or, replying to the
card, a request to change), whatever word it wraps. Question marks are not trailing punctuation.

"Always allow" creates a standing approval bound to a scope (`StandingScope`): for trades the same
instrument and side up to the approved quantity per order; for `write_file` the same path; for
other tools the exact same arguments. It is never offered for `exec_command`, nor for trades while
live trading is on.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, overload

from agent.texts import Text
from agent.texts import words as texts_in

# The documented lists (README "Approvals"). Short on purpose: anything else is not consent.
AFFIRMATIVE = frozenset(
    {
        "yes",
        "y",
        "ok",
        "okay",
        "allow",
        "approve",
        "confirm",
        "好",
        "好的",
        "是",
        "是的",
        "确认",
        "可以",
        "同意",
        "允许",
        "批准",
    }
)
STANDING = frozenset({"always", "always allow", "总是允许", "始终允许"})
NEGATIVE = frozenset(
    {
        "no",
        "n",
        "deny",
        "reject",
        "cancel",
        "stop",
        "don't",
        "dont",
        "不",
        "不要",
        "不用",
        "否",
        "拒绝",
        "取消",
        "别",
    }
)

# Trades: a standing approval covers the same instrument and side, up to the approved quantity.
TRADING_TOOLS = frozenset({"execute_trade"})
# A standing approval would waive every later command: never offered.
NEVER_STANDING = frozenset({"exec_command"})
# Bound to the path only (the content may differ).
PATH_TOOLS = frozenset({"write_file"})

Source = Literal["button", "command", "text"]
# What an approval card's button stands for (bot/cards.py reads its callback data into this once).
ButtonChoice = Literal["once", "always", "deny"]
ConsentKind = Literal["allow_once", "allow_standing", "deny", "edit", "unclear"]

_TRAILING = re.compile(r"[\s!！。.,，~～、;；:：]+$")
# Every question mark Unicode has (and the interrobang); NFKC is not needed to find them.
QUESTION_MARKS = frozenset("?？¿;՞؟፧᥅⁇⁈⁉‽⍰❓❔⳺⳻⸮⹔꘏꛷︖﹖𑅃𞥟🯄\U000e003f")
# English question forms: a reply that opens with an auxiliary or a question word, or carries a
# doubting word or tag anywhere ("ok really", "fine right", "yes or not").
_EN_OPENERS = (
    "is|are|am|was|were|do|does|did|can|could|should|shall|will|would|may|might|must|"
    "what|why|how|which|who|whom|whose|when|where|whether|isn't|aren't|don't you|won't"
)
_EN_QUESTION = re.compile(
    rf"^\W*(?:{_EN_OPENERS})\b|\b(?:really|seriously|for real|sure about|you sure|right|or not|"
    r"isn't it|is it|are you|do you|can i|should i|shall i|what|why|how)\b",
    re.IGNORECASE,
)
# Chinese question forms: the particles 吗/嘛/么/呢/吧 (traditional forms too), an A-not-A
# ("好不好", "可不可以", "是没是"), and the question words.
_ZH_QUESTION = re.compile(
    r"[吗嗎嘛么麼呢吧]|(\w)[不没沒]\1|真的|是否|难道|難道|到底|究竟|怎么|怎麼|什么|什麼|为什么|為什麼|如何|哪|谁|誰|多少|几"
)
# Format characters (zero-width spaces and joiners, bidi controls) must not hide a question word.
_FORMAT = re.compile(r"[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]")

_SPACES = re.compile(r"\s+")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def normalize(text: str) -> str:
    """The form compared with the word lists (see the module docstring)."""
    s = _TRAILING.sub("", text.strip()).strip()
    return _SPACES.sub(" ", s).translate(_ASCII_LOWER)


def asks(text: str) -> bool:
    """True when `text` carries a question form (see the module docstring): never an allow."""
    if any(ch in QUESTION_MARKS for ch in text):
        return True
    bare = _FORMAT.sub("", text)
    return bool(_EN_QUESTION.search(bare) or _ZH_QUESTION.search(bare))


# the scope of a standing approval as a card and /rules show it (agent sits below bot/)
SCOPE_WORDS: dict[str, Text] = {
    "trade": Text(
        en="{tool} {side} {instrument} ≤ {max} per order",
        zh="{tool} {side} {instrument}，每笔 ≤ {max}",
    ),
    "exact": Text(
        en="{tool} with exactly these arguments",
        zh="{tool}，且参数完全相同",
    ),
    "side_buy": Text(
        en="buy",
        zh="买入",
    ),
    "side_sell": Text(
        en="sell",
        zh="卖出",
    ),
}


@dataclass(frozen=True, slots=True)
class StandingScope:
    """What a standing approval covers. `kind`: trade (instrument + side, up to `max_quantity`
    per order), path (the same file path) or exact (the same arguments, by hash)."""

    tool: str
    kind: Literal["trade", "path", "exact"]
    instrument: str = ""
    side: str = ""
    max_quantity: float = 0.0
    path: str = ""
    args_hash: str = ""

    def covers(self, tool: str, arguments: dict[str, Any] | None) -> bool:
        if tool != self.tool:
            return False
        args = arguments or {}
        if self.kind == "trade":
            qty = _number(args.get("quantity"))
            return (
                _instrument(args.get("code")) == self.instrument
                and str(args.get("side", "")).lower() == self.side
                and qty is not None
                and 0 < qty <= self.max_quantity
            )
        if self.kind == "path":
            return isinstance(args.get("path"), str) and _path(args["path"]) == self.path
        return _hash(tool, args) == self.args_hash

    def describe(self, lang: str = "en") -> str:
        """One line in `lang` (en or zh): codes, paths and numbers, and the few words around them."""
        words = texts_in(SCOPE_WORDS, lang)
        if self.kind == "trade":
            side = words.get(f"side_{self.side}", self.side)
            return words["trade"].format(
                tool=self.tool, side=side, instrument=self.instrument, max=f"{self.max_quantity:g}"
            )
        if self.kind == "path":
            return f"{self.tool} {self.path}"
        return words["exact"].format(tool=self.tool)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "kind": self.kind,
            "instrument": self.instrument,
            "side": self.side,
            "max_quantity": self.max_quantity,
            "path": self.path,
            "args_hash": self.args_hash,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StandingScope:
        return cls(
            tool=str(data.get("tool", "")),
            kind=data.get("kind", "exact"),
            instrument=str(data.get("instrument", "")),
            side=str(data.get("side", "")),
            max_quantity=float(data.get("max_quantity") or 0.0),
            path=str(data.get("path", "")),
            args_hash=str(data.get("args_hash", "")),
        )


@dataclass(frozen=True, slots=True)
class StandingApproval:
    """A granted "Always allow": a policy record, changed only by `/rules` and `tapebot rules`."""

    id: str
    chat_key: str
    scope: StandingScope
    granted_by: str
    created_at: datetime
    expires_at: datetime
    approval_id: str = ""

    @property
    def tool(self) -> str:
        return self.scope.tool


@dataclass(frozen=True, slots=True)
class ConsentDecision:
    kind: ConsentKind
    scope: StandingScope | None = None  # for allow_standing
    note: str = ""  # for edit: what the user asked to change
    question: bool = False  # unclear because the reply was a question (it gets its own hint)

    @property
    def allows(self) -> bool:
        return self.kind in ("allow_once", "allow_standing")

    @property
    def gate_decision(self) -> Literal["once", "always", "deny", "edit"] | None:
        """The ApprovalGate's word for it; None when unclear (nothing is decided)."""
        return {
            "allow_once": "once",
            "allow_standing": "always",
            "deny": "deny",
            "edit": "edit",
        }.get(self.kind)  # type: ignore[return-value]


def standing_scope(
    tool: str, arguments: dict[str, Any] | None, *, live_trading: bool
) -> StandingScope | None:
    """What "Always allow" would cover for this action; None when it is not offered."""
    args = arguments or {}
    if tool in NEVER_STANDING:
        return None
    if tool in TRADING_TOOLS:
        qty = _number(args.get("quantity"))
        side = str(args.get("side", "")).lower()
        code = _instrument(args.get("code"))
        if live_trading or qty is None or qty <= 0 or side not in ("buy", "sell") or not code:
            return None
        return StandingScope(tool, "trade", instrument=code, side=side, max_quantity=qty)
    if tool in PATH_TOOLS:
        path = args.get("path")
        if not isinstance(path, str) or not path.strip():
            return None
        return StandingScope(tool, "path", path=_path(path))
    return StandingScope(tool, "exact", args_hash=_hash(tool, args))


@overload
def read_consent(
    source: Literal["button"],
    answer: ButtonChoice,
    *,
    scope: StandingScope | None = None,
    replying_to_card: bool = False,
) -> ConsentDecision: ...


@overload
def read_consent(
    source: Literal["command", "text"],
    answer: str,
    *,
    scope: StandingScope | None = None,
    replying_to_card: bool = False,
) -> ConsentDecision: ...


def read_consent(
    source: Source,
    answer: str,
    *,
    scope: StandingScope | None = None,
    replying_to_card: bool = False,
) -> ConsentDecision:
    """The decision an answer to an approval card stands for. `source`: button (its
    `ButtonChoice`, as bot/cards.parse_callback read it), command (approve/deny) or text (a typed
    reply, in a chat or the terminal). A button's answer that is no `ButtonChoice` is unclear.
    `scope`: what "Always allow" would cover, None when it is not offered. `replying_to_card`: a
    typed reply to the card that is neither yes nor no is a request to change the action (a
    denial that carries the note back to the model). A question is never an allow (`asks`)."""
    if source == "button":
        if answer == "once":
            return ConsentDecision("allow_once")
        if answer == "always":
            return ConsentDecision("allow_standing", scope) if scope else ConsentDecision("unclear")
        return ConsentDecision("deny") if answer == "deny" else ConsentDecision("unclear")
    if source == "command":
        if answer == "approve":
            return ConsentDecision("allow_once")
        return ConsentDecision("deny") if answer == "deny" else ConsentDecision("unclear")
    word = normalize(answer)
    if asks(answer):  # "yes?", "可以吗", "really ok": a question is never consent
        if replying_to_card and word:
            return ConsentDecision("edit", note=answer.strip(), question=True)
        return ConsentDecision("unclear", question=True)
    if word in AFFIRMATIVE:
        return ConsentDecision("allow_once")
    if word in STANDING:
        return ConsentDecision("allow_standing", scope) if scope else ConsentDecision("unclear")
    if word in NEGATIVE:
        return ConsentDecision("deny")
    if replying_to_card and word:
        return ConsentDecision("edit", note=answer.strip())
    return ConsentDecision("unclear")


# ---- helpers ------------------------------------------------------------------------------------
def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _instrument(value: Any) -> str:
    return value.strip().upper() if isinstance(value, str) else ""


def _path(value: str) -> str:
    return value.strip()


def _hash(tool: str, args: dict[str, Any]) -> str:
    canon = json.dumps({"tool": tool, "args": args}, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canon.encode()).hexdigest()


__all__ = [
    "AFFIRMATIVE",
    "NEGATIVE",
    "QUESTION_MARKS",
    "STANDING",
    "ButtonChoice",
    "ConsentDecision",
    "StandingApproval",
    "StandingScope",
    "asks",
    "normalize",
    "read_consent",
    "standing_scope",
]
