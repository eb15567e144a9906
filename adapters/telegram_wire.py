"""Inbound Telegram updates as small typed values, parsed straight from the Bot API JSON.

Why not `telegram.Update.de_json`: it checks nothing. It accepts a message without a chat, a
string `message_id` and a number for `text` without a word (python-telegram-bot 22), so the
adapter would still need the checks below, on top of a parse that builds the whole frozen object
tree (chat, user, entities, the replied-to message and everything in it). Measured for a group
message with a mention and a reply (December 2026, 2-core machine, load ~8, 5,000 calls each):
`parse_update` 25-33 µs, `Update.de_json` 307-418 µs, i.e. ~0.3 ms more per message against the
event loop's ~0.9 ms per message in bench/chat_throughput.py. The adapter reads a dozen fields of
two update kinds, so it parses and checks those and nothing else; python-telegram-bot still does
everything outbound (requests, errors, the rate limiter).

Parsing is strict where the adapter relies on a field (ids, types, the chat): a malformed update
raises `MalformedUpdate` and is skipped and logged by the adapter, never half-handled. Fields the
adapter does not use are ignored, as python-telegram-bot ignores unknown ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agent.text import scrub

PRIVATE = "private"


class MalformedUpdate(ValueError):
    """An update whose shape is not what the Bot API sends."""


@dataclass(frozen=True, slots=True)
class WireUser:
    id: int
    is_bot: bool
    first_name: str
    last_name: str | None = None
    username: str | None = None
    language_code: str | None = None

    @property
    def full_name(self) -> str:
        return _full_name(self.first_name, self.last_name)


@dataclass(frozen=True, slots=True)
class WireChat:
    id: int
    type: str
    title: str | None = None
    first_name: str | None = None
    last_name: str | None = None

    @property
    def name(self) -> str:
        """The group's title, or the private chat's full name (python-telegram-bot's rule)."""
        if self.title:
            return self.title
        return _full_name(self.first_name, self.last_name) if self.first_name else ""


@dataclass(frozen=True, slots=True)
class WireEntity:
    type: str
    offset: int  # in UTF-16 code units, as Telegram counts
    length: int


@dataclass(frozen=True, slots=True)
class WireMessage:
    message_id: int
    date: int  # Unix seconds; 0 for an inaccessible message (a callback on a very old one)
    chat: WireChat
    from_user: WireUser | None = None
    text: str | None = None
    entities: tuple[WireEntity, ...] = ()
    message_thread_id: int | None = None
    is_topic_message: bool = False
    reply_to: WireMessage | None = None

    @property
    def sent_at(self) -> datetime:
        return datetime.fromtimestamp(self.date, UTC)

    @property
    def accessible(self) -> bool:
        return self.date != 0

    def entity_text(self, entity: WireEntity) -> str:
        """The text an entity covers (offsets are UTF-16 code units)."""
        raw = (self.text or "").encode("utf-16-le")
        return raw[entity.offset * 2 : (entity.offset + entity.length) * 2].decode("utf-16-le")


@dataclass(frozen=True, slots=True)
class WireCallback:
    id: str
    from_user: WireUser
    data: str | None = None
    message: WireMessage | None = None


@dataclass(frozen=True, slots=True)
class WireUpdate:
    update_id: int
    message: WireMessage | None = None
    callback_query: WireCallback | None = None


def _full_name(first: str, last: str | None) -> str:
    """python-telegram-bot's rule: the first name, then the last name if there is one."""
    return f"{first} {last}" if last else first


def parse_update(item: Any) -> WireUpdate:
    """The update's message or callback query (other kinds parse to neither)."""
    if not isinstance(item, dict):
        raise MalformedUpdate("an update is a JSON object")
    update_id = _int(item, "update_id")
    msg = item.get("message")
    cq = item.get("callback_query")
    return WireUpdate(
        update_id,
        message=None if msg is None else _message(msg),
        callback_query=None if cq is None else _callback(cq),
    )


def _message(d: Any, *, depth: int = 0) -> WireMessage:
    if not isinstance(d, dict):
        raise MalformedUpdate("a message is a JSON object")
    frm = d.get("from")
    text = d.get("text")
    if text is not None and not isinstance(text, str):
        raise MalformedUpdate("message text is a string")
    thread = d.get("message_thread_id")
    reply = d.get("reply_to_message")
    return WireMessage(
        message_id=_int(d, "message_id"),
        date=_int(d, "date"),
        chat=_chat(d.get("chat")),
        from_user=None if frm is None else _user(frm),
        # a lone surrogate (an emoji cut in half) is replaced here, before anyone stores it;
        # entity offsets stay right: U+FFFD is one UTF-16 unit, as the half it replaces
        text=scrub(text) if text is not None else None,
        entities=_entities(d.get("entities")) if text else (),
        message_thread_id=thread if isinstance(thread, int) else None,
        is_topic_message=d.get("is_topic_message") is True,
        # the replied-to message matters only for its id and author: one level deep is enough
        reply_to=None if reply is None or depth else _message(reply, depth=1),
    )


def _chat(d: Any) -> WireChat:
    if not isinstance(d, dict) or not isinstance(d.get("type"), str):
        raise MalformedUpdate("a chat is a JSON object with a type")
    return WireChat(_int(d, "id"), d["type"], _str(d, "title"), _str(d, "first_name"), _str(d, "last_name"))


def _user(d: Any) -> WireUser:
    if not isinstance(d, dict):
        raise MalformedUpdate("a user is a JSON object")
    return WireUser(
        _int(d, "id"),
        d.get("is_bot") is True,
        _str(d, "first_name") or "",
        _str(d, "last_name"),
        _str(d, "username"),
        _str(d, "language_code"),
    )


def _callback(d: Any) -> WireCallback:
    if not isinstance(d, dict) or not isinstance(d.get("id"), str):
        raise MalformedUpdate("a callback query is a JSON object with an id")
    msg = d.get("message")
    return WireCallback(
        d["id"], _user(d.get("from")), _str(d, "data"), None if msg is None else _message(msg, depth=1)
    )


def _entities(raw: Any) -> tuple[WireEntity, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise MalformedUpdate("entities are a list")
    out = []
    for e in raw:
        if not isinstance(e, dict) or not isinstance(e.get("type"), str):
            raise MalformedUpdate("an entity is a JSON object with a type")
        out.append(WireEntity(e["type"], _int(e, "offset"), _int(e, "length")))
    return tuple(out)


def _int(d: dict[str, Any], key: str) -> int:
    value = d.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedUpdate(f"{key} is an integer")
    return value


def _str(d: dict[str, Any], key: str) -> str | None:
    value = d.get(key)
    return scrub(value) if isinstance(value, str) else None
