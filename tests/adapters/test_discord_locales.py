"""Discord shows a Traditional Chinese client (zh-TW) the zh-TW localization of a command: our
Chinese is Simplified, so it must not be offered as Traditional. Every
`*_localizations` map in the payload we PUT (command, option and choice names and descriptions)
has Simplified text only under zh-CN, and zh-TW is absent (or truly Traditional)."""

from __future__ import annotations

from typing import Any

from adapters.discord import command_payload
from bot.commands import builtin_commands

# characters our Simplified texts use whose Traditional form differs
SIMPLIFIED_ONLY = set("对话开当压缩记忆换认许简报务运规则长删级态这们时间显单关闭项拒绝准查")


def localizations(node: Any) -> list[dict[str, str]]:
    if isinstance(node, dict):
        found = [v for k, v in node.items() if k.endswith("_localizations") and isinstance(v, dict)]
        return found + [m for v in node.values() for m in localizations(v)]
    if isinstance(node, list):
        return [m for v in node for m in localizations(v)]
    return []


def test_simplified_chinese_is_not_offered_as_traditional():
    specs = [c.spec for c in builtin_commands()]
    payload = command_payload(specs)
    maps = localizations(payload)
    assert len(maps) > len(specs), "options and choices are localized too"
    new = next(s for s in specs if s.name == "new")
    assert any(m.get("zh-CN") == new.description.zh for m in maps)
    for m in maps:
        traditional = m.get("zh-TW")
        assert traditional is None or not SIMPLIFIED_ONLY & set(traditional), m
