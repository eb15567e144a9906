"""The few sentences adapters say on their own (before the gateway sees anything), in English and
Chinese. The gateway can pass its own table to an adapter's `notices=` to override them."""

from __future__ import annotations

from agent.texts import Catalogue, Text, pick_language

__all__ = ["DEFAULT_NOTICES", "notice", "pick_language"]

DEFAULT_NOTICES: dict[str, Text] = {
    "unsupported": Text(
        en="I can only read text messages for now — please send your request as text.",
        zh="我目前只能读取文字消息，请用文字发送你的请求。",
    ),
    "stale": Text(
        en="I was offline and skipped {n} message(s) sent while I was away. Please send again if still needed.",
        zh="我刚才离线，跳过了离线期间的 {n} 条消息。如仍需要，请重新发送。",
    ),
    "empty": Text(
        en="(empty)",
        zh="（空）",
    ),
}


def notice(table: Catalogue, key: str, language_code: str | None, **fmt: object) -> str:
    text = (table.get(key) or DEFAULT_NOTICES[key]).pick(pick_language(language_code))
    return text.format(**fmt) if fmt else text
