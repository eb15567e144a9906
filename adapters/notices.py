"""The few sentences adapters say on their own (before the gateway sees anything), in English and
Chinese. The gateway can pass its own table to an adapter's `notices=` to override them."""

from __future__ import annotations

from collections.abc import Mapping

DEFAULT_NOTICES: dict[str, dict[str, str]] = {
    "unsupported": {
        "en": "I can only read text messages for now — please send your request as text.",
        "zh": "我目前只能读取文字消息，请用文字发送你的请求。",
    },
    "stale": {
        "en": "I was offline and skipped {n} message(s) sent while I was away. Please send again if still needed.",
        "zh": "我刚才离线，跳过了离线期间的 {n} 条消息。如仍需要，请重新发送。",
    },
    "empty": {
        "en": "(empty)",
        "zh": "（空）",
    },
}


def pick_language(language_code: str | None) -> str:
    return "zh" if (language_code or "").lower().startswith("zh") else "en"


def notice(table: Mapping[str, Mapping[str, str]], key: str, language_code: str | None, **fmt: object) -> str:
    entry = table.get(key) or DEFAULT_NOTICES[key]
    text = entry.get(pick_language(language_code)) or entry.get("en") or next(iter(entry.values()))
    return text.format(**fmt) if fmt else text
