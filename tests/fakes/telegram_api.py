"""An in-process fake of the Telegram Bot API, faithful at the wire level.

Two ways in, one state:
- `FakeRequest(api)`: python-telegram-bot's transport seam (`telegram.request.BaseRequest`); pass it as
  `request=` / `get_updates_request=`. Fast: no sockets.
- `await api.serve()`: an aiohttp server on 127.0.0.1 with routes `/bot<token>/<method>`; point the
  bot at `api.base_url` (the `[telegram] api_base_url` value).

It keeps chats, messages (with edit history), callback answers, chat actions, photos, the command
menu and the webhook; honours getUpdates offsets (an update is forgotten once a later offset is
requested, as Telegram does) with a bounded long-poll; validates HTML the way Telegram does ("can't
parse entities"); enforces the 4096-character limit after entity parsing; reproduces "message is not
modified"; and can inject failures (429 with retry_after, 400 parse errors, anything), also only
for calls that match a predicate, or *after* the call took effect ("delivered but the bot was told it
failed", as a timeout or a 5xx after Telegram applied the request); updates can be redelivered with
their original update_id.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import itertools
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from telegram.request import BaseRequest, RequestData

BOT_USER = {"id": 999, "is_bot": True, "first_name": "Tapebot", "username": "tapebot_test_bot"}

_ALLOWED_TAGS = {
    "b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a", "code", "pre",
    "blockquote", "tg-emoji",
}  # fmt: skip
_TAG = re.compile(
    r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[a-zA-Z-]+(?:=\"[^\"<>]*\"|='[^'<>]*'|=[^\s<>]*)?)*)\s*>"
)
_ENTITY = re.compile(r"&(lt|gt|amp|quot|#\d{1,7}|#x[0-9a-fA-F]{1,6});")


class ParseError(Exception):
    pass


def parse_telegram_html(text: str) -> str:
    """Return the visible text of Bot API HTML, or raise ParseError like Telegram would."""
    out: list[str] = []
    stack: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "<":
            m = _TAG.match(text, i)
            if not m:
                raise ParseError(f"Unexpected end of name token at byte offset {len(text[:i].encode())}")
            closing, name = m.group(1) == "/", m.group(2).lower()
            if name not in _ALLOWED_TAGS:
                raise ParseError(f'Unsupported start tag "{name}" at byte offset {len(text[:i].encode())}')
            if closing:
                if not stack or stack[-1] != name:
                    raise ParseError(
                        f'Unmatched end tag at byte offset {len(text[:i].encode())}, expected "</{stack[-1] if stack else ""}>", found "</{name}>"'
                    )
                stack.pop()
            else:
                if (stack and stack[-1] in ("code",)) or (stack and stack[-1] == "pre" and name != "code"):
                    raise ParseError(f"Entities can't be nested in {stack[-1]}")
                if name == "a" and 'href="' not in m.group(3) and "href='" not in m.group(3):
                    raise ParseError("Can't find end of a URL")
                stack.append(name)
            i = m.end()
        elif ch == "&":
            m = _ENTITY.match(text, i)
            if not m:
                raise ParseError(
                    f"Can't find end of the entity starting at byte offset {len(text[:i].encode())}"
                )
            out.append(html.unescape(m.group(0)))
            i = m.end()
        elif ch == ">":
            raise ParseError(f"Unexpected > at byte offset {len(text[:i].encode())}")
        else:
            out.append(ch)
            i += 1
    if stack:
        raise ParseError(f'Can\'t find end tag corresponding to start tag "{stack[-1]}"')
    return "".join(out)


def _utf16_len(s: str) -> int:
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)


def _err(status: int, description: str, **parameters: Any) -> tuple[int, dict]:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if parameters:
        body["parameters"] = parameters
    return status, body


def retry_after(seconds: int = 1) -> tuple[int, dict]:
    return _err(429, f"Too Many Requests: retry after {seconds}", retry_after=seconds)


def cant_parse() -> tuple[int, dict]:
    return _err(400, 'Bad Request: can\'t parse entities: Unsupported start tag "x" at byte offset 0')


@dataclass
class Injection:
    """A failure for calls to `method` (that `match`, if given): `response` is a Bot API answer
    (status, body) or an exception raised from the transport (e.g. `telegram.error.TimedOut()`).
    `after`: the call takes effect first and then fails; `before_reply(result)` is awaited in
    between (e.g. to let the user act on a message the bot does not know was sent)."""

    method: str
    response: tuple[int, dict] | BaseException | None  # None: the call's own answer (delayed)
    after: bool = False
    match: Callable[[dict[str, Any]], bool] | None = None
    times: int = 1
    before_reply: Callable[[Any], Awaitable[Any]] | None = None


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)
    at: float = field(default_factory=time.monotonic)


def button_of(msg: dict, kind: str) -> dict:
    """The button of a card whose callback data is of `kind` ("o" approve once, "a" always, "d"
    deny, …: the part before the colon)."""
    return next(b for b in buttons_of(msg) if b["callback_data"].startswith(f"{kind}:"))


def text_update(
    update_id: int, text: str, *, chat_id: int = 5, user_id: int = 1, first_name: str = "A"
) -> dict:
    """A Telegram update carrying one private text message, as Telegram posts it to a webhook."""
    return {
        "update_id": update_id,
        "message": {
            "message_id": update_id,
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private", "first_name": first_name},
            "from": {"id": user_id, "is_bot": False, "first_name": first_name},
            "text": text,
        },
    }


def buttons_of(msg: dict) -> list[dict]:
    """The inline buttons of a message the bot sent (a dict as the fake stores it)."""
    return [b for row in (msg.get("reply_markup") or {}).get("inline_keyboard", []) for b in row]


class FakeBotAPI:
    def __init__(self, token: str = "123456:TEST-token-abcdef", *, max_poll_wait: float = 0.2):
        self.token = token
        self.max_poll_wait = max_poll_wait
        self.updates: list[dict] = []  # not yet confirmed
        self.confirmed_offset = 0
        self.calls: list[Call] = []
        self.chats: dict[int, dict] = {}
        self.users: dict[int, dict] = {}
        self.messages: dict[tuple[int, int], dict] = {}
        self.bot_messages: list[tuple[int, int]] = []  # order of messages the bot sent
        self.edits: list[tuple[int, int, str]] = []
        self.callback_answers: list[dict] = []
        self.chat_actions: list[dict] = []
        self.commands: dict[str, list[dict]] = {}
        self.webhook: dict[str, Any] = {}
        self.fail_next: dict[str, list[tuple[int, dict]]] = {}
        self.injections: list[Injection] = []
        self.pushed: dict[int, dict] = {}  # every update ever pushed, by id (for redelivery)
        self._update_ids = itertools.count(1000)
        self._message_ids = itertools.count(100)
        self._callback_ids = itertools.count(5000)
        self._new_update = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    # ---- failure injection -------------------------------------------------------------------
    def fail(self, method: str, response: tuple[int, dict], times: int = 1) -> None:
        self.fail_next.setdefault(method, []).extend([response] * times)

    def fail_when(
        self,
        method: str,
        response: tuple[int, dict] | BaseException,
        *,
        match: Callable[[dict[str, Any]], bool] | None = None,
        times: int = 1,
    ) -> Injection:
        """Fail the next `times` calls to `method` whose parameters `match` (nothing happens)."""
        inj = Injection(method, response, after=False, match=match, times=times)
        self.injections.append(inj)
        return inj

    def fail_after(
        self,
        method: str,
        response: tuple[int, dict] | BaseException,
        *,
        match: Callable[[dict[str, Any]], bool] | None = None,
        times: int = 1,
        before_reply: Callable[[Any], Awaitable[Any]] | None = None,
    ) -> Injection:
        """An ambiguous failure: the next `times` matching calls take effect (the message is
        sent, the edit applied), then the caller gets `response` (e.g. a 500, or a raised
        `telegram.error.TimedOut()` as if the answer never came back). `before_reply(result)`,
        if given, is awaited after the effect and before that answer."""
        inj = Injection(method, response, after=True, match=match, times=times, before_reply=before_reply)
        self.injections.append(inj)
        return inj

    def delay_reply(
        self,
        method: str,
        before_reply: Callable[[Any], Awaitable[Any]],
        *,
        match: Callable[[dict[str, Any]], bool] | None = None,
        times: int = 1,
    ) -> Injection:
        """The next `times` matching calls are answered as usual (success or error), but only after
        `before_reply(result)` (e.g. the user sees the message and acts on it before the bot has the
        response; `result` is None for an error)."""
        inj = Injection(method, None, after=True, match=match, times=times, before_reply=before_reply)
        self.injections.append(inj)
        return inj

    def hold(
        self,
        method: str,
        until: Callable[[Any], Awaitable[Any]],
        *,
        match: Callable[[dict[str, Any]], bool] | None = None,
        times: int = 1,
        then: tuple[int, dict] | None = None,
    ) -> Injection:
        """The next `times` matching calls wait for `until(None)` before they take effect — or,
        with `then`, are answered that instead and never take effect (e.g. the bot is killed
        while its send is on the way: the message never arrives)."""
        inj = Injection(method, then, after=False, match=match, times=times, before_reply=until)
        self.injections.append(inj)
        return inj

    def _injection(
        self, method: str, params: dict[str, Any], after: bool, applied: bool = True
    ) -> Injection | None:
        """The first injection for this call; a failure *after* the effect needs an applied call."""
        for inj in self.injections:
            if inj.after and inj.response is not None and not applied:
                continue
            if inj.method == method and inj.after == after and (inj.match is None or inj.match(params)):
                inj.times -= 1
                if inj.times <= 0:
                    self.injections.remove(inj)
                return inj
        return None

    # ---- chat/user model ----------------------------------------------------------------------
    def user(self, user_id: int, first_name: str = "User", language_code: str | None = "en") -> dict:
        u = {"id": user_id, "is_bot": False, "first_name": first_name}
        if language_code:
            u["language_code"] = language_code
        self.users[user_id] = u
        return u

    def chat(self, chat_id: int, *, title: str | None = None, forum: bool = False) -> dict:
        if chat_id in self.chats:
            return self.chats[chat_id]
        if chat_id > 0:
            c = {
                "id": chat_id,
                "type": "private",
                "first_name": self.users.get(chat_id, {}).get("first_name", "U"),
            }
        else:
            c = {"id": chat_id, "type": "supergroup", "title": title or f"Group {chat_id}"}
            if forum:
                c["is_forum"] = True
        self.chats[chat_id] = c
        return c

    # ---- pushing updates (what users do) ----------------------------------------------------
    def push_update(self, body: dict, *, update_id: int | None = None) -> int:
        """Queue an update; `update_id` given: exactly that id (a duplicate delivery, if reused)."""
        uid = next(self._update_ids) if update_id is None else update_id
        self.pushed.setdefault(uid, body)
        self.updates.append({"update_id": uid, **body})
        self._new_update.set()
        return uid

    def redeliver(self, update_id: int) -> int:
        """Deliver an earlier update again, same id and content (Telegram does this when the
        offset that confirms it never reached it, e.g. a crash before the next getUpdates)."""
        return self.push_update(self.pushed[update_id], update_id=update_id)

    def make_message(
        self,
        chat_id: int,
        *,
        user_id: int = 1,
        first_name: str = "User",
        language_code: str | None = "en",
        thread_id: int | None = None,
        date: float | None = None,
        reply_to: int | None = None,
        forum: bool = False,
        **content: Any,
    ) -> dict:
        frm = self.users.get(user_id) or self.user(user_id, first_name, language_code)
        chat = self.chat(chat_id, forum=forum or thread_id is not None)
        msg: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(date if date is not None else time.time()),
            "chat": chat,
            "from": frm,
            **content,
        }
        if thread_id is not None:
            msg["message_thread_id"] = thread_id
            msg["is_topic_message"] = True
        if reply_to is not None:
            msg["reply_to_message"] = self.messages[(chat_id, reply_to)]
        self.messages[(chat_id, msg["message_id"])] = msg
        return msg

    def push_text(self, chat_id: int, text: str, **kw: Any) -> int:
        """A user's text message; "/cmd args" gets a bot_command entity like real clients send."""
        content: dict[str, Any] = {"text": text}
        if text.startswith("/"):
            content["entities"] = [{"type": "bot_command", "offset": 0, "length": len(text.split()[0])}]
        mentions = [
            {"type": "mention", "offset": m.start(), "length": m.end() - m.start()}
            for m in re.finditer(r"@\w+", text)
            if not text.startswith("/") or m.start() > len(text.split()[0])
        ]
        if mentions:
            content.setdefault("entities", []).extend(mentions)
        msg = self.make_message(chat_id, **content, **kw)
        return self.push_update({"message": msg})

    def push_sticker(self, chat_id: int, **kw: Any) -> int:
        sticker = {"file_id": "stk", "file_unique_id": "stku", "type": "regular", "width": 512, "height": 512,
                   "is_animated": False, "is_video": False}  # fmt: skip
        return self.push_update({"message": self.make_message(chat_id, sticker=sticker, **kw)})

    def push_document(self, chat_id: int, *, size: int = 50_000_000, **kw: Any) -> int:
        doc = {"file_id": "doc", "file_unique_id": "docu", "file_name": "big.bin", "file_size": size}
        return self.push_update({"message": self.make_message(chat_id, document=doc, **kw)})

    def push_callback(self, chat_id: int, message_id: int, data: str, *, user_id: int = 1) -> int:
        frm = self.users.get(user_id) or self.user(user_id)
        msg = self.messages.get((chat_id, message_id))
        if msg is None:  # inaccessible message
            msg = {"chat": self.chat(chat_id), "message_id": message_id, "date": 0}
        return self.push_update(
            {
                "callback_query": {
                    "id": str(next(self._callback_ids)),
                    "from": frm,
                    "chat_instance": f"ci{chat_id}",
                    "data": data,
                    "message": msg,
                }
            }
        )

    # ---- what the bot did (assertion helpers) ------------------------------------------------
    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def sent(self, chat_id: int | None = None) -> list[dict]:
        return [self.messages[k] for k in self.bot_messages if chat_id is None or k[0] == chat_id]

    def texts(self, chat_id: int | None = None) -> list[str]:
        return [m.get("text", m.get("caption", "")) for m in self.sent(chat_id)]

    # A wait returns as soon as its condition holds; the generous default only matters on a
    # loaded CI machine (two suites share two cores there), where a short one made tests flaky.
    async def wait_for(self, pred: Callable[[], Any], timeout: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            v = pred()
            if v:
                return v
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"condition not met within {timeout}s; calls={[c.method for c in self.calls]}"
                )
            await asyncio.sleep(0.005)

    async def wait_for_card(self, chat_id: int) -> dict:
        """The first message sent to `chat_id` with buttons (an approval card, a question), once
        there is one."""
        return await self.wait_for(lambda: next((m for m in self.sent(chat_id) if buttons_of(m)), None))

    # ---- the API --------------------------------------------------------------------------------
    async def handle(
        self, method: str, p: dict[str, Any], files: dict[str, bytes] | None = None
    ) -> tuple[int, dict]:
        self.calls.append(Call(method, dict(p), files or {}))
        queued = self.fail_next.get(method)
        if queued:
            resp = queued.pop(0)
            if not queued:
                del self.fail_next[method]
            return resp
        before = self._injection(method, p, after=False)
        if before is not None:
            if before.before_reply is not None:  # held before it takes effect (`hold`)
                await before.before_reply(None)
            if before.response is not None:
                return _respond(before.response)
        fn = getattr(self, f"_m_{method}", None)
        if fn is None:
            return _err(404, "Not Found")
        result = await fn(p, files or {})
        after = self._injection(method, p, after=True, applied=result[0] == 200)
        if after is not None:
            if after.before_reply is not None:
                await after.before_reply(result[1].get("result"))
            if after.response is not None:
                return _respond(after.response)
        return result

    @staticmethod
    def _ok(result: Any) -> tuple[int, dict]:
        return 200, {"ok": True, "result": result}

    async def _m_getMe(self, p, f):
        return self._ok(BOT_USER)

    async def _m_deleteWebhook(self, p, f):
        if _bool(p.get("drop_pending_updates")):
            self.updates.clear()
        self.webhook = {}
        return self._ok(True)

    async def _m_setWebhook(self, p, f):
        self.webhook = dict(p)
        if _bool(p.get("drop_pending_updates")):
            self.updates.clear()
        return self._ok(True)

    async def _m_getWebhookInfo(self, p, f):
        return self._ok({"url": self.webhook.get("url", ""), "has_custom_certificate": False,
                         "pending_update_count": len(self.updates)})  # fmt: skip

    async def _m_getUpdates(self, p, f):
        if self.webhook.get("url"):
            return _err(
                409,
                "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
            )
        off = int(p.get("offset") or 0)
        if off:
            self.confirmed_offset = max(self.confirmed_offset, off)
            self.updates = [u for u in self.updates if u["update_id"] >= off]
        limit = int(p.get("limit") or 100)
        if not self.updates:
            self._new_update.clear()
            wait = min(float(p.get("timeout") or 0), self.max_poll_wait)
            if wait > 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._new_update.wait(), wait)
        return self._ok(list(self.updates[:limit]))

    def _check_text(self, text: str, parse_mode: str | None, limit: int = 4096) -> tuple[int, dict] | str:
        visible = text
        if parse_mode == "HTML":
            try:
                visible = parse_telegram_html(text)
            except ParseError as e:
                return _err(400, f"Bad Request: can't parse entities: {e}")
        elif parse_mode:
            return _err(400, f"Bad Request: unsupported parse_mode {parse_mode}")
        if not visible.strip():
            return _err(400, "Bad Request: message text is empty")
        if _utf16_len(visible) > limit:
            return _err(400, "Bad Request: message is too long")
        return visible

    def _bot_message(self, p: dict, **content: Any) -> dict:
        cid = int(p["chat_id"])
        if cid not in self.chats:
            return {}
        m: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": self.chats[cid],
            "from": BOT_USER,
            **content,
        }
        if p.get("message_thread_id"):
            m["message_thread_id"] = int(p["message_thread_id"])
            m["is_topic_message"] = True
        if p.get("reply_markup"):
            m["reply_markup"] = json.loads(p["reply_markup"])
        for key in ("parse_mode", "link_preview_options"):
            if p.get(key):
                m[f"_{key}"] = p[key]  # recorded for assertions; PTB ignores unknown keys
        if p.get("reply_parameters"):
            rp = json.loads(p["reply_parameters"])
            orig = self.messages.get((cid, int(rp["message_id"])))
            if orig:
                m["reply_to_message"] = {k: v for k, v in orig.items() if k != "reply_to_message"}
        self.messages[(cid, m["message_id"])] = m
        self.bot_messages.append((cid, m["message_id"]))
        return m

    async def _m_sendMessage(self, p, f):
        if int(p["chat_id"]) not in self.chats:
            return _err(400, "Bad Request: chat not found")
        checked = self._check_text(p.get("text", ""), p.get("parse_mode"))
        if isinstance(checked, tuple):
            return checked
        return self._ok(self._bot_message(p, text=checked))

    async def _m_editMessageText(self, p, f):
        key = (int(p["chat_id"]), int(p["message_id"]))
        m = self.messages.get(key)
        if m is None:
            return _err(400, "Bad Request: message to edit not found")
        checked = self._check_text(p.get("text", ""), p.get("parse_mode"))
        if isinstance(checked, tuple):
            return checked
        markup = json.loads(p["reply_markup"]) if p.get("reply_markup") else None
        if m.get("text") == checked and m.get("reply_markup") == markup:
            return _err(
                400,
                "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
            )
        new = {k: v for k, v in m.items() if k != "reply_markup"}
        new.update(text=checked, edit_date=int(time.time()), _parse_mode=p.get("parse_mode"))
        if markup:
            new["reply_markup"] = markup
        self.messages[key] = new
        self.edits.append((key[0], key[1], checked))
        return self._ok(new)

    async def _m_editMessageReplyMarkup(self, p, f):
        key = (int(p["chat_id"]), int(p["message_id"]))
        m = self.messages.get(key)
        if m is None:
            return _err(400, "Bad Request: message to edit not found")
        new = {k: v for k, v in m.items() if k != "reply_markup"}
        if p.get("reply_markup"):
            new["reply_markup"] = json.loads(p["reply_markup"])
        self.messages[key] = new
        return self._ok(new)

    async def _m_deleteMessage(self, p, f):
        self.messages.pop((int(p["chat_id"]), int(p["message_id"])), None)
        return self._ok(True)

    async def _m_answerCallbackQuery(self, p, f):
        if any(a["callback_query_id"] == p["callback_query_id"] for a in self.callback_answers):
            return _err(
                400, "Bad Request: query is too old and response timeout expired or query ID is invalid"
            )
        self.callback_answers.append(dict(p))
        return self._ok(True)

    async def _m_sendChatAction(self, p, f):
        self.chat_actions.append(dict(p))
        return self._ok(True)

    async def _m_sendPhoto(self, p, f):
        if int(p["chat_id"]) not in self.chats:
            return _err(400, "Bad Request: chat not found")
        caption = p.get("caption", "")
        if caption:
            checked = self._check_text(caption, p.get("parse_mode"), limit=1024)
            if isinstance(checked, tuple):
                return checked
            caption = checked
        photo_bytes = next(iter(f.values()), b"")
        photo = [{"file_id": f"ph{len(self.bot_messages)}", "file_unique_id": "u", "width": 10, "height": 10,
                  "file_size": len(photo_bytes)}]  # fmt: skip
        content: dict[str, Any] = {"photo": photo}
        if caption:
            content["caption"] = caption
        return self._ok(self._bot_message(p, **content))

    async def _m_setMyCommands(self, p, f):
        self.commands[p.get("language_code") or ""] = json.loads(p["commands"])
        return self._ok(True)

    async def _m_deleteMyCommands(self, p, f):
        self.commands.pop(p.get("language_code") or "", None)
        return self._ok(True)

    # ---- HTTP serving -------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self.port, "call serve() first"
        return f"http://127.0.0.1:{self.port}/bot"

    async def serve(self, host: str = "127.0.0.1") -> str:
        """`host`: where to listen ("0.0.0.0" for a container on a bridge network to reach it)."""
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._http)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self.base_url

    async def close(self) -> None:
        if self._runner:
            await self._runner.cleanup()
            self._runner = None

    async def _http(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            status, body = _err(401, "Unauthorized")
            return web.json_response(body, status=status)
        params: dict[str, Any] = {}
        files: dict[str, bytes] = {}
        ctype = request.content_type
        if ctype.startswith("multipart/"):
            reader = await request.multipart()
            async for part in reader:
                if part.filename:
                    files[part.name or "file"] = await part.read()
                else:
                    params[part.name] = await part.text()
        elif ctype == "application/json":
            raw = await request.json()
            params = {k: v if isinstance(v, str) else json.dumps(v) for k, v in (raw or {}).items()}
        else:
            params = dict(await request.post())
            params.update(request.query)
        status, body = await self.handle(request.match_info["method"], params, files)
        return web.json_response(body, status=status)

    # ---- webhook delivery (Telegram → bot) ------------------------------------------------------
    async def deliver_webhook(self, *, secret: str | None = None, url: str | None = None) -> list[int]:
        """POST every pending update to the webhook, in order; drop the ones answered 2xx."""
        import aiohttp

        url = url or self.webhook["url"]
        token = secret if secret is not None else self.webhook.get("secret_token")
        headers = {"X-Telegram-Bot-Api-Secret-Token": token} if token else {}
        statuses = []
        async with aiohttp.ClientSession() as s:
            for u in list(self.updates):
                async with s.post(url, json=u, headers=headers) as r:
                    statuses.append(r.status)
                    if 200 <= r.status < 300:
                        self.updates.remove(u)
        return statuses


def _respond(response: tuple[int, dict] | BaseException) -> tuple[int, dict]:
    if isinstance(response, BaseException):
        raise response
    return response


def _bool(v: Any) -> bool:
    return str(v).lower() in ("true", "1")


class FakeRequest(BaseRequest):
    """PTB transport that calls the fake directly (no sockets).

    `read_timeout`: if given, a call whose answer takes longer than the call's read timeout (the
    one the caller passed, else this default) raises `TimedOut` like httpx would, while the fake
    still completes it: a slow send that landed although the bot was told it timed out."""

    def __init__(self, api: FakeBotAPI, *, read_timeout: float | None = None):
        self.api = api
        self._read_timeout = read_timeout

    async def initialize(self) -> None:
        pass

    async def shutdown(self) -> None:
        pass

    @property
    def read_timeout(self) -> float:
        return self._read_timeout or 1.0

    async def do_request(self, url, method, request_data: RequestData | None = None, read_timeout=None,
                         write_timeout=None, connect_timeout=None, pool_timeout=None):  # fmt: skip
        params = dict(request_data.json_parameters) if request_data else {}
        files: dict[str, bytes] = {}
        if request_data and request_data.contains_files:
            for name, value in (request_data.multipart_data or {}).items():
                content = value[1] if isinstance(value, tuple) else value
                if hasattr(content, "read"):
                    content = content.read()
                files[name] = bytes(content)
                params.pop(name, None)
        call = asyncio.ensure_future(self.api.handle(url.rsplit("/", 1)[-1], params, files))
        limit = read_timeout if isinstance(read_timeout, int | float) else self._read_timeout
        if limit is not None:
            done, _ = await asyncio.wait({call}, timeout=limit)
            if not done:  # the call goes on and takes effect; the caller is told it timed out
                from telegram.error import TimedOut

                raise TimedOut("Timed out (fake read timeout)")
        status, body = await call
        return status, json.dumps(body).encode()
