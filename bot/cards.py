"""Approval cards and question prompts: what the user sees, and the buttons' callback data.

Arguments are shown canonically (sorted JSON), with control and bidi characters made visible so
a model cannot hide part of an action (e.g. U+202E reversing text), and truncated with a marker
and a hash of the full arguments when long — the hash is what the approval is bound to.

A card is informed consent: for a trade it shows the instrument's name and code, side,
quantity, last price and its date, estimated amount and fees, cash after, and PAPER or LIVE; every
card says who may approve, when it expires and what "Always allow" would cover (the button is only
there when it is offered). The same words are shown on Telegram, in the terminal and on Discord
(there as an embed: `approval_view`).
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from adapters.base import Button, Card
from agent import ApprovalRecord, WaitingState
from agent.consent import ButtonChoice, StandingScope
from agent.tools import sandbox
from agent.tools.workspace import LocalToolPolicy
from bot.i18n import t

if TYPE_CHECKING:
    from markets.broker import OrderProblem
    from markets.preview import TradePreview

MAX_ARGS_CHARS = 900
# Callback data: "<kind>:<id>" — kind a/o/d for always/once/deny, q<N> for question option N.
DECISIONS: dict[str, ButtonChoice] = {"o": "once", "a": "always", "d": "deny"}
MAX_CALLBACK_DATA = 64  # Telegram's limit for a button's data

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


def render_arguments(arguments: dict[str, Any], args_hash: str, lang: str = "en") -> str:
    """The arguments as shown; a long one keeps its head AND its tail (where `rm -rf` may hide),
    with what was cut, the full length of each long argument (an exec card's command) and the
    hash the approval is bound to between them."""
    text = visible(json.dumps(arguments, ensure_ascii=False, sort_keys=True, indent=1))
    if len(text) > MAX_ARGS_CHARS:
        head, tail = text[: MAX_ARGS_CHARS * 2 // 3], text[-(MAX_ARGS_CHARS // 3) :]
        cut = len(text) - len(head) - len(tail)
        notes = [t(lang, "card_cut", cut=f"{cut:,}", total=f"{len(text):,}")]
        notes += [
            t(lang, "card_cut_arg", name=visible(k[:40]), length=f"{len(v):,}")
            for k, v in sorted(arguments.items())
            if isinstance(v, str) and len(v) > MAX_ARGS_CHARS // 3
        ]
        text = f"{head}\n… [{'; '.join(notes)}; sha256 {args_hash[:16]}] …\n{tail}"
    return text


def _code_block(text: str) -> str:
    return "```\n" + text.replace("```", "`\u200b``") + "\n```"


@dataclass(frozen=True, slots=True)
class CardInfo:
    """What a card says besides the action: who may approve, until when, what "Always allow"
    would cover (None: not offered), and the trade's facts when it is a trade."""

    expires_at: datetime | None
    group: bool = False
    scope: StandingScope | None = None
    standing_hours: float = 24.0
    trade: TradePreview | None = None
    note: str = ""  # what the tool may do (exec_command: its sandbox)
    zone: str = "UTC"  # the chat's time zone (an IANA name): times on the card are shown in it
    # outside content the turn read before proposing this (files, URLs, command output)
    sources: tuple[str, ...] = ()


def local_time(at: datetime, zone: str, fmt: str = "%Y-%m-%d %H:%M") -> str:
    """`at` in the chat's zone; UTC for an unknown zone name."""
    try:
        tz = ZoneInfo(zone)
    except (ValueError, KeyError):  # ZoneInfoNotFoundError is a KeyError
        tz = ZoneInfo("UTC")
    return at.astimezone(tz).strftime(fmt)


def _money(value: float) -> str:
    return f"{value:,.2f}"


def _trade_lines(p: TradePreview, lang: str) -> list[str]:
    name = f"{visible(p.name)} ({p.code})" if p.name else p.code
    label = "LIVE ⚠️" if p.live else "PAPER"
    side = t(lang, p.side) if p.side in ("buy", "sell") else visible(p.side)
    lines = [f"📈 **{t(lang, 'card_trade', side=side, quantity=f'{p.quantity:g}', name=name, label=label)}**"]
    if p.price is None:
        lines.append(t(lang, "card_no_price"))
        return lines
    lines.append(t(lang, "card_price", price=f"{p.price:,.2f}", as_of=p.as_of))
    if p.amount is not None and p.fees is not None:
        lines.append(t(lang, "card_amount", amount=_money(p.amount), fees=_money(p.fees)))
    rejected = p.problem is not None and not p.problem.waits
    if p.problem is not None:
        lines.append(_problem_line(p.problem, lang))
    if p.cash is not None and rejected:  # not "cash after" as if it filled
        lines.append(t(lang, "card_cash_unchanged", cash=_money(p.cash)))
    elif p.cash is not None and p.cash_after is not None:
        lines.append(t(lang, "card_cash", cash=_money(p.cash), after=_money(p.cash_after)))
    return lines


def _problem_line(problem: OrderProblem, lang: str) -> str:
    """What the broker would run into, in the chat's language."""
    f = problem.figures
    if problem.kind == "limit":
        word = t(lang, str(f.get("word", "limit-up")))
        return t(lang, "card_warn_limit_waits" if problem.waits else "card_warn_limit", word=word)
    figures = {
        k: (f"{v:,.2f}" if k in ("need", "have") and problem.kind == "cash" else _num(v))
        for k, v in f.items()
    }
    return t(lang, f"card_warn_{problem.kind}", **figures)


def _num(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float | int) else str(value)


def card_summary(info: CardInfo, lang: str) -> str:
    """The card's readable head, kept on the card once it is decided: the trade, its amount and
    any warning (empty for other tools, whose name heads the decided card anyway)."""
    p = info.trade
    if p is None:
        return ""
    lines = _trade_lines(p, lang)[:1]
    if p.amount is not None and p.fees is not None:
        lines.append(t(lang, "card_amount", amount=_money(p.amount), fees=_money(p.fees)))
    if p.problem is not None:
        lines.append(_problem_line(p.problem, lang))
    return "\n".join(lines)


def approval_card(
    record: ApprovalRecord, lang: str, info: CardInfo, now: datetime | None = None
) -> tuple[str, list[list[Button]]]:
    """The card as one message (Telegram, the terminal via `plain`)."""
    view, buttons = approval_view(record, lang, info, now)
    return view.text, buttons


def approval_view(
    record: ApprovalRecord, lang: str, info: CardInfo, now: datetime | None = None
) -> tuple[Card, list[list[Button]]]:
    """The card as a `Card` (a Discord embed), whose `text` is the same words as one message."""
    body = []
    if info.trade is not None:
        body += _trade_lines(info.trade, lang)
    else:
        body.append(t(lang, "approval_body", tool=record.tool))
    if info.note:
        body.append(info.note)
    if info.sources:
        body.append(t(lang, "card_sources", sources="; ".join(visible(s) for s in info.sources)))
    body.append(t(lang, "card_who_group" if info.group else "card_who_dm"))
    if info.expires_at is not None:
        minutes = max(0, round((info.expires_at - (now or record.created_at)).total_seconds() / 60))
        at = local_time(info.expires_at, info.zone)
        body.append(t(lang, "card_expires", at=at, minutes=minutes, zone=info.zone))
    if info.scope is not None:
        key = "card_always_group" if info.group else "card_always"
        body.append(t(lang, key, scope=visible(info.scope.describe(lang)), hours=f"{info.standing_hours:g}"))
    else:
        body.append(t(lang, "card_no_always"))
    raw = _code_block(render_arguments(record.arguments, record.args_hash, lang))
    hint = t(lang, "approval_hint")
    lines = [
        f"🔐 **{t(lang, 'approval_title')}** · `{record.id}`",
        *body,
        t(lang, "card_raw"),
        raw,
        f"_{hint}_",
    ]
    card = Card(
        title=f"🔐 {t(lang, 'approval_title')} · {record.id}",
        body="\n".join(body),
        fields=((t(lang, "card_raw"), raw),),
        footer=hint,
        text="\n".join(lines),
    )
    row = [Button(t(lang, "btn_once"), f"o:{record.id}", "success")]
    if info.scope is not None:
        row.append(Button(t(lang, "btn_always"), f"a:{record.id}", "primary"))
    row.append(Button(t(lang, "btn_deny"), f"d:{record.id}", "danger"))
    return card, [row]


def exec_note(policy: LocalToolPolicy, lang: str) -> str:
    """The exec_command card's lines saying what its sandbox allows and what it may take."""
    mode = sandbox.mode(policy)
    note = t(lang, f"exec_{mode}")
    if mode == "refused":
        return note
    return note + "\n" + t(lang, "exec_limits", **sandbox.limits_summary(policy))


def plain(text: str) -> str:
    """A card for the terminal: the same words without the chat markup."""
    text = re.sub(r"```\n?", "", text)
    return text.replace("**", "").replace("`", "").replace("\n_", "\n").rstrip("_")


def approval_final(
    record: ApprovalRecord,
    lang: str,
    outcome: str,
    who: str,
    rule: str = "",
    *,
    summary: str = "",
    decided_at: datetime | None = None,
    zone: str = "UTC",
) -> str:
    """A decided card: its readable summary (as the card showed it), the raw arguments, and the
    decision with its time in the chat's zone."""
    key = {
        "once": "approved_by",
        "always": "approved_always_by",
        "deny": "denied_by",
        "edit": "edit_by",
        "expired": "expired",
        "moved_on": "moved_on",
        "no_answer": "expired",
    }.get(outcome, "expired")
    decision = t(lang, key, who=who, rule=rule)
    if decided_at is not None:
        decision = t(lang, "card_decided_at", outcome=decision, at=local_time(decided_at, zone, "%H:%M"))
    head = f"🔐 {record.tool} · `{record.id}`"
    if summary:
        head += "\n" + summary
    return f"{head}\n{_code_block(render_arguments(record.arguments, record.args_hash, lang))}\n{decision}"


def question_prompt(waiting: WaitingState, turn_id: str) -> tuple[str, list[list[Button]]]:
    text = f"❓ {visible(waiting.question)}"
    if waiting.options:
        text += "\n" + "\n".join(f"{i}. {visible(o)}" for i, o in enumerate(waiting.options, 1))
    buttons = [[Button(o[:40], f"q{i}:{turn_id}")] for i, o in enumerate(waiting.options, 1)]
    return text, buttons


@dataclass(frozen=True, slots=True)
class CardTap:
    """An approval card's button: its choice goes to agent/consent.read_consent as it is."""

    choice: ButtonChoice
    approval_id: str


@dataclass(frozen=True, slots=True)
class OptionTap:
    """A question's option button; `index` counts from 1 (not checked against the options here)."""

    index: int
    turn_id: str


def parse_callback(data: str) -> CardTap | OptionTap | None:
    """A button's callback data, read once into what it stands for; None if malformed. An
    option's number is ASCII digits only (`str.isdigit` also takes "²", which `int` refuses)."""
    kind, sep, ident = data.partition(":")
    if not sep or not ident or len(data) > MAX_CALLBACK_DATA:
        return None
    choice = DECISIONS.get(kind)
    if choice is not None:
        return CardTap(choice, ident)
    number = kind[1:]
    if kind[:1] == "q" and number.isascii() and number.isdigit():
        return OptionTap(int(number), ident)
    return None
