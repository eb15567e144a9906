"""A loopback fake of Discord's REST API and gateway, enough for discord.py 2.7 to run for real.

    fake = FakeDiscord(tls=True); await fake.start()
    DiscordAdapter(token, ..., connector=fake.connector())  # discord.com, gateway.discord.gg → fake
    or, for a `tapebot` process: [discord] api_base_url / gateway_url = fake.addresses, and
    SSL_CERT_FILE=fake.ca_file in its environment
    client.start("token") → GET /users/@me, GET /oauth2/applications/@me, WS HELLO/IDENTIFY/READY
    await fake.push_dm(channel_id=300, user_id=42, content="hi")          # MESSAGE_CREATE
    await fake.push_slash("status", args="", user_id=42, channel_id=300)  # INTERACTION_CREATE type 2
    await fake.push_button("tb:abc", message_id=..., channel_id=300)      # INTERACTION_CREATE type 3

Every REST call is recorded in `fake.calls` as `RestCall(method, path, json)`; channel messages live
in `fake.messages[channel_id]` (edits applied), interaction callbacks in `fake.callbacks`, followups in
`fake.followups`, command syncs in `fake.command_syncs`. JSON responses carry exactly
`Content-Type: application/json` (discord.py compares the header string).

Faults: `fail_next[(method, fragment)]` answers the next matching call with an error and does
nothing; `inject(method, fragment, status=..., after=True)` applies the call first and then answers
the error (a 5xx after Discord created the message); `hold(method, fragment)` applies the call and
answers only once the returned event is set. A message create carrying `nonce` with
`enforce_nonce` returns the message already created with that nonce, as Discord does.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import socket
import ssl
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import WSMsgType, web
from aiohttp.abc import AbstractResolver, ResolveResult

APP_ID = "1000"
BOT = {
    "id": "1000",
    "username": "tapebot",
    "discriminator": "0",
    "avatar": None,
    "bot": True,
    "global_name": "Tapebot",
}


def _jr(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    return web.Response(body=json.dumps(obj).encode(), status=status, headers=h)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def user_payload(user_id: int | str, name: str = "alice") -> dict:
    return {
        "id": str(user_id),
        "username": name,
        "discriminator": "0",
        "avatar": None,
        "global_name": name.title(),
    }


@dataclass
class Fault:
    method: str
    fragment: str
    status: int | None  # None: answer normally (after `release`)
    body: dict = field(default_factory=dict)
    after: bool = True
    times: int = 1
    release: asyncio.Event | None = None


@dataclass
class RestCall:
    method: str
    path: str
    json: Any
    query: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)


class _Loopback(AbstractResolver):
    """Every host name resolves to the fake's port on 127.0.0.1."""

    def __init__(self, port: int):
        self.port = port

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return [
            {
                "hostname": host,
                "host": "127.0.0.1",
                "port": self.port,
                "family": socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
        ]

    async def close(self) -> None:
        pass


def _certificate() -> tuple[bytes, bytes]:
    """A self-signed certificate (PEM) and its key for Discord's host names."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake discord")])
    now = datetime.now(UTC)
    hosts = [x509.DNSName(h) for h in ("discord.com", "gateway.discord.gg")]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(hosts), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pkcs8 = serialization.PrivateFormat.PKCS8
    return cert.public_bytes(serialization.Encoding.PEM), key.private_bytes(
        serialization.Encoding.PEM, pkcs8, serialization.NoEncryption()
    )


class FakeDiscord:
    def __init__(self, *, tls: bool = False) -> None:
        # tls: served over HTTPS/WSS as discord.com and gateway.discord.gg (see `connector`)
        self.tls = tls
        self._cert = b""
        self._ca_dir = ""
        self.calls: list[RestCall] = []
        self.messages: dict[str, list[dict]] = {}
        self.callbacks: list[dict] = []  # {"interaction_id", "token", "type", "data"}
        self.followups: list[dict] = []  # {"token", "message"}
        self.command_syncs: list[dict] = []  # {"path", "payload"}
        self.identifies: list[dict] = []
        self.reject_identify_with: int | None = None  # e.g. 4014 "disallowed intents"
        self.app_flags = 0  # application flags, e.g. 1 << 19: Message Content intent enabled in the portal
        self.token: str | None = None  # when set, REST calls with another bot token get 401
        self.token_channels: dict[str, str] = {}  # interaction token -> channel id (for followups)
        self.fail_next: dict[tuple[str, str], list[tuple[int, dict]]] = {}
        self.faults: list[Fault] = []
        self._nonces: dict[tuple[str, str], dict] = {}  # (channel, nonce) -> message created with it
        self._ids = itertools.count(1)
        self._seq = itertools.count(2)
        self._ws: web.WebSocketResponse | None = None
        self._ws_ready = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    # ---- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/gw", self._gateway)
        app.router.add_get("/", self._gateway)  # wss://gateway.discord.gg/
        app.router.add_route("*", "/api/v10/{tail:.*}", self._rest)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        server_ssl = None
        if self.tls:
            self._cert, key = _certificate()
            with tempfile.TemporaryDirectory() as tmp:
                cert_file, key_file = Path(tmp, "cert.pem"), Path(tmp, "key.pem")
                cert_file.write_bytes(self._cert)
                key_file.write_bytes(key)
                server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
                server_ssl.load_cert_chain(cert_file, key_file)
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=server_ssl)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def close(self) -> None:
        if self._ws is not None and not self._ws.closed:
            await self._ws.close()
        if self._runner:
            await self._runner.cleanup()
        if self._ca_dir:
            shutil.rmtree(self._ca_dir, ignore_errors=True)

    def connector(self) -> aiohttp.TCPConnector:
        """A connector for one discord.py client (`discord.Client(connector=…)`): Discord's hosts
        resolve to this fake, whose certificate it trusts. Nothing else in the process changes."""
        if not self.tls:
            raise RuntimeError("FakeDiscord(tls=True) serves Discord's host names")
        trust = ssl.create_default_context(cadata=self._cert.decode())
        return aiohttp.TCPConnector(resolver=_Loopback(self.port), ssl=trust)

    @property
    def addresses(self) -> dict[str, str]:
        """`[discord] api_base_url` and `gateway_url` for a process that trusts `ca_file`."""
        return {
            "api_base_url": f"https://127.0.0.1:{self.port}/api/v10",
            "gateway_url": f"wss://127.0.0.1:{self.port}/gw",
        }

    @property
    def ca_file(self) -> str:
        """The fake's certificate as a PEM file (for SSL_CERT_FILE); removed at `close`."""
        if not self._ca_dir:
            self._ca_dir = tempfile.mkdtemp(prefix="fake-discord-")
            Path(self._ca_dir, "ca.pem").write_bytes(self._cert)
        return str(Path(self._ca_dir, "ca.pem"))

    def inject(
        self, method: str, fragment: str, *, status: int = 502, after: bool = True, times: int = 1
    ) -> Fault:
        """The next `times` matching calls fail with `status`; `after`: once they took effect."""
        fault = Fault(method, fragment, status, {"message": "injected", "code": 0}, after, times)
        self.faults.append(fault)
        return fault

    def hold(self, method: str, fragment: str, *, times: int = 1) -> asyncio.Event:
        """The next matching calls take effect, then wait for the returned event to answer."""
        release = asyncio.Event()
        self.faults.append(Fault(method, fragment, None, after=True, times=times, release=release))
        return release

    def _fault(self, method: str, path: str, after: bool) -> Fault | None:
        for fault in self.faults:
            if fault.method == method and fault.fragment in path and fault.after == after:
                fault.times -= 1
                if fault.times <= 0:
                    self.faults.remove(fault)
                return fault
        return None

    def new_id(self) -> str:
        """A snowflake carrying the current time (discord.py derives created_at from it)."""
        ms = int(time.time() * 1000) - 1420070400000
        return str((ms << 22) + (next(self._ids) % 4096))

    # ---- gateway ----------------------------------------------------------------------------------
    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._ws = ws
        self._ws_ready.clear()
        await ws.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": 41250}, "s": None, "t": None}))
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            d = json.loads(msg.data)
            if d["op"] == 2:
                self.identifies.append(d["d"])
                if self.reject_identify_with is not None:
                    await ws.close(code=self.reject_identify_with, message=b"Disallowed intent(s).")
                    break
                ready = {
                    "v": 10, "user": BOT, "guilds": [], "session_id": f"s{len(self.identifies)}",
                    "resume_gateway_url": "wss://gateway.discord.gg/gw" if self.tls
                    else f"ws://127.0.0.1:{self.port}/gw",
                    "application": {"id": APP_ID, "flags": 0},
                }  # fmt: skip
                await ws.send_str(json.dumps({"op": 0, "s": 1, "t": "READY", "d": ready}))
                self._ws_ready.set()
            elif d["op"] == 1:
                await ws.send_str(json.dumps({"op": 11}))
        if self._ws is ws:
            self._ws = None
        return ws

    async def dispatch(self, event: str, data: dict) -> None:
        await asyncio.wait_for(self._ws_ready.wait(), 5)
        assert self._ws is not None
        await self._ws.send_str(json.dumps({"op": 0, "s": next(self._seq), "t": event, "d": data}))

    # ---- pushing user actions ---------------------------------------------------------------------
    def _message(self, channel_id: str, author: dict, content: str, **extra: Any) -> dict:
        return {
            "id": self.new_id(), "channel_id": str(channel_id), "author": author, "content": content,
            "timestamp": _now(), "edited_timestamp": None, "tts": False, "mention_everyone": False,
            "mentions": [], "mention_roles": [], "attachments": [], "embeds": [], "pinned": False,
            "type": 0, "flags": 0, "components": [], **extra,
        }  # fmt: skip

    async def push_dm(self, channel_id: int | str, user_id: int | str, content: str, **extra: Any) -> dict:
        msg = self._message(str(channel_id), user_payload(user_id), content, **extra)
        self.messages.setdefault(str(channel_id), []).append(msg)
        await self.dispatch("MESSAGE_CREATE", msg)
        return msg

    async def push_guild_message(
        self, guild_id: int | str, channel_id: int | str, user_id: int | str, content: str, *,
        mention_bot: bool = False, **extra: Any,
    ) -> dict:  # fmt: skip
        mentions = [{**BOT, "member": {"roles": [], "joined_at": _now()}}] if mention_bot else []
        if mention_bot and f"<@{BOT['id']}>" not in content:
            content = f"<@{BOT['id']}> {content}"
        msg = self._message(
            str(channel_id), user_payload(user_id), content, guild_id=str(guild_id), mentions=mentions,
            member={"roles": [], "joined_at": _now(), "deaf": False, "mute": False}, **extra,
        )  # fmt: skip
        self.messages.setdefault(str(channel_id), []).append(msg)
        await self.dispatch("MESSAGE_CREATE", msg)
        return msg

    def _interaction(self, itype: int, data: dict, *, user_id: int | str, channel_id: int | str,
                     guild_id: int | str | None, locale: str, **extra: Any) -> dict:  # fmt: skip
        iid = self.new_id()
        self.token_channels[f"itok{iid}"] = str(channel_id)
        payload: dict[str, Any] = {
            "id": iid, "application_id": APP_ID, "type": itype, "token": f"itok{iid}", "version": 1,
            "channel_id": str(channel_id), "locale": locale, "entitlements": [],
            "authorizing_integration_owners": {"0": "1"}, "attachment_size_limit": 8388608,
            "app_permissions": "0", "data": data, **extra,
        }  # fmt: skip
        if guild_id is None:
            payload["channel"] = {"id": str(channel_id), "type": 1}
            payload["user"] = user_payload(user_id)
            payload["context"] = 1
        else:
            payload["guild_id"] = str(guild_id)
            payload["channel"] = {"id": str(channel_id), "type": 0, "guild_id": str(guild_id), "name": "general",
                                  "position": 0, "permission_overwrites": []}  # fmt: skip
            payload["member"] = {"user": user_payload(user_id), "roles": [], "joined_at": _now(), "deaf": False,
                                 "mute": False, "permissions": "0", "flags": 0}  # fmt: skip
            payload["context"] = 0
        return payload

    async def push_slash(self, name: str, args: str = "", *, user_id: int | str = 42, channel_id: int | str = 300,
                         guild_id: int | str | None = None, locale: str = "en-US") -> dict:  # fmt: skip
        data: dict[str, Any] = {"id": "9000", "name": name, "type": 1}
        if args:
            data["options"] = [{"name": "args", "type": 3, "value": args}]
        payload = self._interaction(
            2, data, user_id=user_id, channel_id=channel_id, guild_id=guild_id, locale=locale
        )
        await self.dispatch("INTERACTION_CREATE", payload)
        return payload

    async def push_command(self, name: str, options: list[dict], *, user_id: int | str = 42,
                           channel_id: int | str = 300, guild_id: int | str | None = None,
                           locale: str = "en-US", itype: int = 2) -> dict:  # fmt: skip
        """A slash command with typed options as Discord sends them: `options` is the invocation's
        option list (a subcommand is `{"type": 1, "name": "off", "options": [...]}`). `itype` 4 is
        an autocomplete request (the option being typed carries `"focused": true`)."""
        data: dict[str, Any] = {"id": "9000", "name": name, "type": 1, "options": options}
        payload = self._interaction(
            itype, data, user_id=user_id, channel_id=channel_id, guild_id=guild_id, locale=locale
        )
        await self.dispatch("INTERACTION_CREATE", payload)
        return payload

    async def push_autocomplete(self, name: str, options: list[dict], **kw: Any) -> dict:
        return await self.push_command(name, options, itype=4, **kw)

    async def push_button(self, custom_id: str, *, message_id: str | None = None, user_id: int | str = 42,
                          channel_id: int | str = 300, guild_id: int | str | None = None,
                          locale: str = "en-US") -> dict:  # fmt: skip
        msg = None
        for m in self.messages.get(str(channel_id), []):
            if m["id"] == message_id:
                msg = m
        if msg is None:
            msg = self._message(str(channel_id), BOT, "card", id=message_id or self.new_id())
        data = {"custom_id": custom_id, "component_type": 2}
        payload = self._interaction(3, data, user_id=user_id, channel_id=channel_id, guild_id=guild_id,
                                    locale=locale, message=msg)  # fmt: skip
        await self.dispatch("INTERACTION_CREATE", payload)
        return payload

    # ---- assertion helpers ----------------------------------------------------------------------
    def bot_messages(self, channel_id: int | str) -> list[dict]:
        return [m for m in self.messages.get(str(channel_id), []) if m["author"]["id"] == BOT["id"]]

    def calls_matching(self, method: str, fragment: str) -> list[RestCall]:
        return [c for c in self.calls if c.method == method and fragment in c.path]

    # A wait returns as soon as its condition holds; the generous default only matters on a
    # loaded CI machine (two suites share two cores there), where a short one made tests flaky.
    async def wait_for(self, pred: Any, timeout: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            v = pred()
            if v:
                return v
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met; calls={[(c.method, c.path) for c in self.calls]}")
            await asyncio.sleep(0.005)

    # ---- REST -------------------------------------------------------------------------------------
    async def _read_body(self, request: web.Request) -> tuple[Any, list[str]]:
        files: list[str] = []
        if request.content_type.startswith("multipart/"):
            body: Any = None
            reader = await request.multipart()
            async for part in reader:
                if part.name == "payload_json":
                    body = json.loads(await part.text())
                else:
                    await part.read()
                    files.append(part.filename or part.name or "file")
            return body, files
        raw = await request.text()
        return (json.loads(raw) if raw else None), files

    def _bot_message(self, channel_id: str, body: dict, files: list[str], **extra: Any) -> dict:
        msg = self._message(channel_id, BOT, (body or {}).get("content") or "", **extra)
        msg["components"] = (body or {}).get("components") or []
        msg["embeds"] = (body or {}).get("embeds") or []
        msg["flags"] = (body or {}).get("flags", 0)
        msg["attachments"] = [
            {"id": self.new_id(), "filename": f, "size": 1, "url": "http://x/f", "proxy_url": "http://x/f"}
            for f in files
        ]
        if body and body.get("message_reference"):
            msg["message_reference"] = body["message_reference"]
        self.messages.setdefault(channel_id, []).append(msg)
        return msg

    def _find(self, message_id: str) -> dict | None:
        for msgs in self.messages.values():
            for m in msgs:
                if m["id"] == message_id:
                    return m
        return None

    @staticmethod
    def _apply_edit(msg: dict, body: dict) -> dict:
        for k in ("content", "components", "embeds", "flags"):
            if k in body:
                msg[k] = body[k]
        msg["edited_timestamp"] = _now()
        return msg

    async def _rest(self, request: web.Request) -> web.Response:
        body, files = await self._read_body(request)
        path = "/" + request.match_info["tail"]
        method = request.method
        self.calls.append(RestCall(method, path, body, dict(request.query), files))
        before = self._fault(method, path, after=False)
        if before is not None and before.status is not None:
            return _jr(before.body, before.status)
        response = await self._apply(request, method, path, body, files)
        after = self._fault(method, path, after=True) if response.status < 300 else None
        if after is not None:
            if after.release is not None:
                await after.release.wait()
            if after.status is not None:
                return _jr(after.body, after.status)
        return response

    async def _apply(
        self, request: web.Request, method: str, path: str, body: Any, files: list[str]
    ) -> web.Response:
        for (m, frag), queue in list(self.fail_next.items()):
            if m == method and frag in path and queue:
                status, err = queue.pop(0)
                headers = {}
                if status == 429:
                    headers = {
                        "Retry-After": str(err.get("retry_after", 0.01)),
                        "X-RateLimit-Scope": "user",
                        "Via": "1.1 google",
                    }
                return _jr(err, status, headers)
        parts = path.strip("/").split("/")
        if self.token is not None and request.headers.get("Authorization") != f"Bot {self.token}":
            return _jr({"message": "401: Unauthorized", "code": 0}, 401)

        if path == "/users/@me":
            return _jr(BOT)
        if path == "/oauth2/applications/@me":
            return _jr({"id": APP_ID, "name": "tapebot", "icon": None, "description": "", "bot_public": True,
                        "bot_require_code_grant": False, "verify_key": "k", "flags": self.app_flags, "team": None,
                        "summary": "", "owner": {"id": "1", "username": "o", "discriminator": "0", "avatar": None}})  # fmt: skip
        if parts[0] == "applications" and parts[-1] == "commands":
            if method == "PUT":
                self.command_syncs.append({"path": path, "payload": body})
                return _jr([{**c, "id": str(9000 + i), "application_id": APP_ID, "version": "1",
                             "default_member_permissions": None, "type": c.get("type", 1)}
                            for i, c in enumerate(body or [])])  # fmt: skip
            return _jr(self.command_syncs[-1]["payload"] if self.command_syncs else [])
        if parts[0] == "channels" and len(parts) >= 3:
            cid = parts[1]
            if parts[2] == "typing":
                return web.Response(status=204)
            if parts[2] == "messages" and len(parts) == 3 and method == "POST":
                nonce = (body or {}).get("nonce")
                if nonce is not None and (body or {}).get("enforce_nonce"):
                    known = self._nonces.get((cid, str(nonce)))
                    if known is not None:  # Discord: the same nonce returns the same message
                        return _jr(known)
                    msg = self._bot_message(cid, body, files, nonce=str(nonce))
                    self._nonces[(cid, str(nonce))] = msg
                    return _jr(msg)
                return _jr(self._bot_message(cid, body, files))
            if parts[2] == "messages" and len(parts) == 4:
                msg = self._find(parts[3])
                if msg is None:
                    return _jr({"message": "Unknown Message", "code": 10008}, 404)
                if method == "PATCH":
                    return _jr(self._apply_edit(msg, body or {}))
                if method == "DELETE":
                    self.messages[cid].remove(msg)
                    return web.Response(status=204)
                return _jr(msg)
        if parts[0] == "interactions" and parts[-1] == "callback":
            iid, token = parts[1], parts[2]
            self.callbacks.append({"interaction_id": iid, "token": token, **(body or {})})
            return _jr({"interaction": {"id": iid, "type": 2, "response_message_loading": body.get("type") == 5,
                                        "response_message_ephemeral": False}})  # fmt: skip
        if parts[0] == "webhooks" and len(parts) >= 3:
            token = parts[2]
            if len(parts) == 3 and method == "POST":
                cid = self._channel_of_token(token)
                msg = self._bot_message(cid, body, files, webhook_id=APP_ID)
                self.followups.append({"token": token, "message": msg})
                return _jr(msg)
            if len(parts) == 5 and parts[3] == "messages":
                mid = parts[4]
                msg = self._original(token) if mid == "@original" else self._find(mid)
                if method == "DELETE":
                    if msg is not None:
                        self.messages[msg["channel_id"]].remove(msg)
                    return web.Response(status=204)
                if msg is None:
                    return _jr({"message": "Unknown Message", "code": 10008}, 404)
                if method == "PATCH":
                    return _jr(self._apply_edit(msg, body or {}))
                return _jr(msg)
        return _jr({"message": "404: Not Found", "code": 0}, 404)

    def _channel_of_token(self, token: str) -> str:
        return self.token_channels.get(token, "0")

    def _original(self, token: str) -> dict | None:
        for f in self.followups:
            if f["token"] == token:
                return f["message"]
        return None
