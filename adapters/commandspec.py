"""One typed definition per chat command, read by every surface: the Telegram menu, Discord's slash
commands (typed options, choices, subcommands, autocomplete), the terminal and `/help`.

These are plain values (the bot defines the commands; adapters only render them), so they live on
the adapters' side of the dependency direction. Whatever shape a platform gives the arguments, they
come back into the bot as the one `InboundCommand(name, args)` text the handlers parse
(`args_text`): a Discord subcommand "off" of /brief arrives as args "off", exactly as typed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

OptionKind = Literal["string", "integer", "choice"]
#: where an option's suggestions come from; the bot answers (`CompletionQuery.source`)
CompletionSource = Literal["models", "timezones"]


@dataclass(frozen=True, slots=True)
class Words:
    """A short text in each language the bot speaks. `zh` is Simplified Chinese; `zh_tw` is set
    only when a real Traditional text exists (never Simplified shown under a Traditional locale)."""

    en: str
    zh: str
    zh_tw: str | None = None

    def get(self, lang: str) -> str:
        if lang == "zh":
            return self.zh
        if lang == "zh_tw":
            return self.zh_tw or self.zh
        return self.en


@dataclass(frozen=True, slots=True)
class Choice:
    value: str
    label: Words


@dataclass(frozen=True, slots=True)
class OptionSpec:
    name: str  # lower-case, ≤ 32 chars
    description: Words
    kind: OptionKind = "string"
    required: bool = False
    choices: tuple[Choice, ...] = ()  # kind "choice": the only values allowed
    autocomplete: CompletionSource | None = None  # kind "string": suggestions while typing


@dataclass(frozen=True, slots=True)
class SubcommandSpec:
    name: str
    description: Words
    options: tuple[OptionSpec, ...] = ()
    #: the text this subcommand puts first in `args`; None: its name ("" for /brief's "set",
    #: whose arguments are the spec itself: "/brief 08:30")
    word: str | None = None


@dataclass(frozen=True, slots=True)
class CommandSpec:
    name: str  # lower-case [a-z0-9_], ≤ 32 chars (Telegram and Discord)
    description: Words
    group: str  # the heading it is listed under in /help ("session", "approvals", …)
    admin_only_in_groups: bool = False  # changes a shared chat's settings or policy
    keeps_waiting: bool = False  # leaves a pending card or question open (others close it)
    options: tuple[OptionSpec, ...] = ()  # mutually exclusive with subcommands (Discord's rule)
    subcommands: tuple[SubcommandSpec, ...] = ()

    def subcommand(self, name: str) -> SubcommandSpec | None:
        return next((s for s in self.subcommands if s.name == name), None)


def args_text(spec: CommandSpec | None, sub: str | None, values: Mapping[str, object]) -> str:
    """Typed option values (and a subcommand) → the argument text a person would have typed, with
    values in the spec's order. Unknown option names keep their given order, after the known."""
    words: list[str] = []
    options: Sequence[OptionSpec] = ()
    if spec is not None and sub is not None:
        found = spec.subcommand(sub)
        words.append(sub if found is None or found.word is None else found.word)
        options = found.options if found is not None else ()
    elif spec is not None:
        options = spec.options
    elif sub is not None:
        words.append(sub)
    order = [o.name for o in options] + [k for k in values if k not in {o.name for o in options}]
    for name in order:
        if name in values and str(values[name]).strip():
            words.append(str(values[name]).strip())
    return " ".join(w for w in words if w)


@dataclass(frozen=True, slots=True)
class CompletionQuery:
    source: CompletionSource
    typed: str  # what the user typed so far in that option
    lang: str = "en"


#: answers a completion query with up to 25 suggestions (Discord's limit)
Completer = Callable[[CompletionQuery], Awaitable[list[str]]]

MAX_COMPLETIONS = 25
