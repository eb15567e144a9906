"""SSRF guard for outbound fetches.

A URL is fetched only if its scheme is http(s) and *every* address its host resolves to is a
public unicast address. `GuardedTransport` repeats the check at connect time and then connects to
the address it checked (the Host header and TLS SNI keep the original name), so a DNS answer that
changes between the check and the connection (rebinding) cannot reach an internal address. Every
redirect hop goes through the same transport. DNS failure means no fetch.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable

import httpx

from agent.errors import ToolDenied, ToolFailed

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[str]]]

ALLOWED_SCHEMES = ("http", "https")

# Cloud metadata endpoints, refused by name and by address.
METADATA_HOSTS = frozenset(
    {"metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal"}
)
METADATA_IPS = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),
        ipaddress.ip_address("169.254.170.2"),  # ECS task metadata
        ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
        ipaddress.ip_address("fd00:ec2::254"),
    }
)
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def blocked_reason(ip: IPAddress) -> str | None:
    """Why `ip` must not be fetched, or None when it is a public unicast address."""
    if ip in METADATA_IPS:
        return "a cloud metadata address"
    if isinstance(ip, ipaddress.IPv6Address):
        # Addresses that embed an IPv4 address are judged by the embedded one.
        embedded: ipaddress.IPv4Address | None = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is None and ip.teredo is not None:
            embedded = ip.teredo[1]
        if embedded is not None:
            inner = blocked_reason(embedded)
            if inner:
                return f"{inner} (embedded in an IPv6 address)"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_unspecified:
        return "an unspecified address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return "a carrier-grade NAT address"
    if ip.is_private:
        return "a private address"
    if ip.is_reserved:
        return "a reserved address"
    if not ip.is_global:
        return "a non-public address"
    return None


def _strip_brackets(host: str) -> str:
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def literal_ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(_strip_brackets(host).split("%", 1)[0])
    except ValueError:
        return None


async def resolve_host(host: str, port: int) -> list[str]:
    """All addresses `host` resolves to (the system resolver, off the event loop)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        addr = str(sockaddr[0]).split("%", 1)[0]
        if addr not in seen:
            seen.append(addr)
    return seen


def check_scheme_and_host(url: httpx.URL) -> str:
    """Checks that need no DNS. Returns the host (lower case, no brackets)."""
    if url.scheme not in ALLOWED_SCHEMES:
        raise ToolDenied(f"only http and https URLs can be fetched, not {url.scheme or 'this'}:")
    host = _strip_brackets(url.host or "").lower().rstrip(".")
    if not host:
        raise ToolDenied("the URL has no host")
    return host


async def checked_addresses(
    url: httpx.URL, *, allow_private: bool, resolver: Resolver | None = None
) -> list[str]:
    """Resolve the URL's host and refuse it unless every address is public. Returns the addresses
    (first one is what to connect to)."""
    host = check_scheme_and_host(url)
    if not allow_private:
        if host == "localhost" or host.endswith(".localhost"):
            raise ToolDenied(f"refusing to fetch {host}: it is the local machine")
        if host in METADATA_HOSTS:
            raise ToolDenied(f"refusing to fetch {host}: it is a cloud metadata endpoint")
    ip = literal_ip(host)
    if ip is not None:
        addresses = [str(ip)]
    else:
        resolve = resolver or resolve_host
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            addresses = await resolve(host, port)
        except (OSError, UnicodeError) as exc:
            raise ToolFailed(f"could not resolve {host}: {exc}") from None
        if not addresses:
            raise ToolFailed(f"could not resolve {host}: no addresses")
    if not allow_private:
        for addr in addresses:
            parsed = literal_ip(addr)
            if parsed is None:
                raise ToolDenied(f"refusing to fetch {host}: resolver returned a non-address ({addr})")
            reason = blocked_reason(parsed)
            if reason:
                shown = host if host == addr else f"{host} ({addr})"
                raise ToolDenied(f"refusing to fetch {shown}: it is {reason}")
    return addresses


class GuardedTransport(httpx.AsyncBaseTransport):
    """Re-checks the destination of every request at send time and pins the connection to the
    checked address. Wraps a real transport (or a MockTransport in tests)."""

    def __init__(
        self,
        inner: httpx.AsyncBaseTransport | None = None,
        *,
        allow_private: bool = False,
        resolver: Resolver | None = None,
    ):
        # No keep-alive: a pooled connection is keyed by IP, and must not carry a request for
        # another host name than the one its TLS session was verified for.
        self._owns_inner = inner is None
        self._inner = inner or httpx.AsyncHTTPTransport(
            retries=0, limits=httpx.Limits(max_keepalive_connections=0)
        )
        self._allow_private = allow_private
        self._resolver = resolver

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        addresses = await checked_addresses(
            request.url, allow_private=self._allow_private, resolver=self._resolver
        )
        host = check_scheme_and_host(request.url)
        target = addresses[0]
        if literal_ip(host) is None:
            # Connect to the address we checked; Host (already set) and SNI keep the name, so
            # virtual hosting and certificate verification still use the original host.
            extensions = dict(request.extensions)
            if request.url.scheme == "https":
                extensions["sni_hostname"] = host
            extensions["tapebot_original_url"] = str(request.url)
            pinned = httpx.Request(
                request.method,
                request.url.copy_with(host=target),
                headers=request.headers,
                stream=request.stream,
                extensions=extensions,
            )
            return await self._inner.handle_async_request(pinned)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        if self._owns_inner:  # a transport handed in (shared, or a test mock) stays open
            await self._inner.aclose()
