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


#: what people type for a zone that is not in its IANA name (Chinese city names, Beijing)
CITY_ZONES = {
    "上海": "Asia/Shanghai", "北京": "Asia/Shanghai", "深圳": "Asia/Shanghai", "广州": "Asia/Shanghai",
    "杭州": "Asia/Shanghai", "中国": "Asia/Shanghai", "beijing": "Asia/Shanghai", "peking": "Asia/Shanghai",
    "shenzhen": "Asia/Shanghai", "香港": "Asia/Hong_Kong", "台北": "Asia/Taipei", "新加坡": "Asia/Singapore",
    "东京": "Asia/Tokyo", "首尔": "Asia/Seoul", "伦敦": "Europe/London", "巴黎": "Europe/Paris",
    "柏林": "Europe/Berlin", "法兰克福": "Europe/Berlin", "纽约": "America/New_York",
    "芝加哥": "America/Chicago", "洛杉矶": "America/Los_Angeles", "旧金山": "America/Los_Angeles",
    "san francisco": "America/Los_Angeles", "悉尼": "Australia/Sydney", "迪拜": "Asia/Dubai",
}  # fmt: skip


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


# Cities people type that are not in a zone's name (Beijing keeps Shanghai time), or in Chinese.
CITY_ZONES = {
    "beijing": "Asia/Shanghai",
    "北京": "Asia/Shanghai",
    "上海": "Asia/Shanghai",
    "深圳": "Asia/Shanghai",
    "中国": "Asia/Shanghai",
    "香港": "Asia/Hong_Kong",
    "台北": "Asia/Taipei",
    "东京": "Asia/Tokyo",
    "首尔": "Asia/Seoul",
    "新加坡": "Asia/Singapore",
    "悉尼": "Australia/Sydney",
    "纽约": "America/New_York",
    "芝加哥": "America/Chicago",
    "洛杉矶": "America/Los_Angeles",
    "伦敦": "Europe/London",
    "巴黎": "Europe/Paris",
    "法兰克福": "Europe/Berlin",
    "迪拜": "Asia/Dubai",
}


def timezones(typed: str) -> list[str]:
    """Zones for what was typed: "new york" finds America/New_York (IANA names spell spaces as
    "_"), a city typed in Chinese ("上海") or by a common name ("beijing") finds its zone."""
    typed = typed.strip()
    if not typed:
        return list(COMMON_ZONES)
    low = typed.lower()
    aliased = [zone for city, zone in CITY_ZONES.items() if city.startswith(low) or low.startswith(city)]
    found = match(_zones(), "_".join(typed.split()))
    return list(dict.fromkeys([*aliased, *found]))[:MAX_COMPLETIONS]


def completer(models: Callable[[], Sequence[str]]) -> Completer:
    async def complete(query: CompletionQuery) -> list[str]:
        if query.source == "models":
            return match(list(models()), query.typed)
        if query.source == "timezones":
            return timezones(query.typed)
        return []

    return complete
