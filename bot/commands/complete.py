"""Suggestions while typing an option (Discord autocomplete; a terminal may use them too): model ids
and time zones, matched by what was typed so far."""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable, Sequence
from functools import cache

from adapters.commandspec import MAX_COMPLETIONS, Completer, CompletionQuery

#: offered first when nothing is typed yet (the markets the bot serves, then the common ones)
COMMON_ZONES = ("Asia/Shanghai", "Asia/Hong_Kong", "Asia/Taipei", "Asia/Singapore", "Asia/Tokyo",
                "Europe/London", "Europe/Berlin", "America/New_York", "America/Los_Angeles", "UTC")  # fmt: skip


@cache
def _zones() -> tuple[str, ...]:
    return tuple(sorted(zoneinfo.available_timezones()))


def match(candidates: Sequence[str], typed: str, limit: int = MAX_COMPLETIONS) -> list[str]:
    """Those starting with `typed` (case-insensitive) first, then those containing it."""
    low = typed.strip().lower()
    if not low:
        return list(candidates[:limit])
    starts = [c for c in candidates if c.lower().startswith(low)]
    within = [c for c in candidates if low in c.lower() and c not in starts]
    return (starts + within)[:limit]


def timezones(typed: str) -> list[str]:
    if not typed.strip():
        return list(COMMON_ZONES)
    return match(_zones(), typed)


def completer(models: Callable[[], Sequence[str]]) -> Completer:
    async def complete(query: CompletionQuery) -> list[str]:
        if query.source == "models":
            return match(list(models()), query.typed)
        if query.source == "timezones":
            return timezones(query.typed)
        return []

    return complete
