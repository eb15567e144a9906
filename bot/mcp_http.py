"""tapebot's MCP server over streamable HTTP: `tapebot mcp --http [HOST:]PORT` serves the same
server object as stdio at `/mcp`, through the SDK's own streamable-HTTP app.

Two walls stand in front of it:
- a bearer token (`TAPEBOT_MCP_TOKEN`): when set, every request must carry
  `Authorization: Bearer <token>` (compared in constant time; 401 otherwise). Without one the
  server listens on loopback only — a token is required to listen anywhere else;
- DNS-rebinding protection (the SDK's Host/Origin check), always on: a web page in the user's
  browser cannot reach a loopback server through a hostile DNS name. Hosts other than loopback
  and the bound address are named with `--allowed-host`.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("tapebot.mcp")

DEFAULT_PORT = 8765
PATH = "/mcp"
TOKEN_ENV = "TAPEBOT_MCP_TOKEN"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


class ListenError(ValueError):
    """The listen address or the token setting cannot be served (said as one line to the operator)."""


@dataclass(frozen=True)
class Listen:
    host: str
    port: int

    @property
    def is_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    @property
    def is_wildcard(self) -> bool:
        return self.host in ("0.0.0.0", "::", "")

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{PATH}"


def parse_listen(value: str) -> Listen:
    """`PORT`, `HOST:PORT` or `[V6]:PORT`; the host defaults to 127.0.0.1."""
    text = value.strip()
    host, _, port_text = text.rpartition(":")
    if not _:
        host, port_text = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise ListenError(f"--http takes [HOST:]PORT, e.g. 8765 or 127.0.0.1:8765; got {value!r}") from None
    if not 0 <= port <= 65535:
        raise ListenError(f"--http: port {port} is out of range (0-65535)")
    return Listen(host, port)


def check_exposure(listen: Listen, token: str) -> None:
    """Refuse to listen beyond loopback without a token: anyone on the network could call the tools."""
    if not listen.is_loopback and not token:
        raise ListenError(
            f"refusing to serve MCP on {listen.host} without a token: set {TOKEN_ENV} "
            "(clients then send 'Authorization: Bearer <token>'), or listen on 127.0.0.1"
        )


def allowed_hosts(listen: Listen, extra: Sequence[str] = ()) -> list[str]:
    """Host header values the DNS-rebinding check lets through."""
    names = list(LOOPBACK_NAMES)
    if not listen.is_wildcard and not listen.is_loopback:
        names.append(f"[{listen.host}]" if ":" in listen.host else listen.host)
    names.extend(extra)
    out: list[str] = []
    for name in names:
        out.extend([name, f"{name}:*"])
    return out


class BearerAuth:
    """ASGI wrapper: every HTTP request must carry the configured bearer token."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = dict(scope.get("headers") or []).get(b"authorization", b"")
        if not hmac.compare_digest(sent, self._expected):
            # A JSON-RPC error body: MCP clients show its message instead of a bare status.
            body = (
                b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32001, '
                b'"message": "unauthorized: send Authorization: Bearer <the TAPEBOT_MCP_TOKEN of this server>"}}'
            )
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="tapebot"'),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def http_app(server: Any, listen: Listen, *, token: str = "", extra_hosts: Sequence[str] = ()) -> Any:
    """The ASGI app for `server`: the SDK's streamable-HTTP app at /mcp, rebinding-protected and,
    with a token, behind `BearerAuth`."""
    from mcp.server.transport_security import TransportSecuritySettings

    if listen.is_wildcard and not extra_hosts:
        raise ListenError(
            f"listening on {listen.host or 'every address'}: name the host names clients use "
            "with --allowed-host (the DNS-rebinding check accepts only those and loopback)"
        )
    hosts = allowed_hosts(listen, extra_hosts)
    origins = [f"http://{h}" for h in hosts] + [f"https://{h}" for h in hosts]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )
    app = server.streamable_http_app(streamable_http_path=PATH, transport_security=security, host=listen.host)
    return BearerAuth(app, token) if token else app


async def serve_http(app: Any, listen: Listen, *, started: Any = None) -> None:
    """Run `app` with uvicorn until SIGINT/SIGTERM. `started(port)` is called once it listens
    (the port is the real one when 0 was asked for)."""
    import uvicorn

    config = uvicorn.Config(
        app, host=listen.host, port=listen.port, log_level="warning", lifespan="on", access_log=False
    )
    server = uvicorn.Server(config)

    async def watch() -> None:
        while not server.started:
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1] if server.servers else listen.port
        if started is not None:
            started(port)

    watcher = asyncio.create_task(watch())
    try:
        await server.serve()
    finally:
        watcher.cancel()
