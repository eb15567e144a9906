"""Tests never touch the internet: pytest-socket (pyproject's addopts) lets sockets connect to
loopback only, so a test that would reach out fails instead of quietly depending on the network."""

from __future__ import annotations

import socket

import httpx
import pytest
from pytest_socket import SocketConnectBlockedError


@pytest.mark.filterwarnings("ignore:A test tried to use socket")
def test_a_connection_beyond_loopback_is_refused():
    with pytest.raises(SocketConnectBlockedError):
        socket.create_connection(("192.0.2.1", 443), timeout=1)  # TEST-NET-1: never routed


@pytest.mark.filterwarnings("ignore:A test tried to use socket")
async def test_an_http_client_cannot_reach_out_either():
    async with httpx.AsyncClient() as client:
        with pytest.raises(Exception) as refused:
            await client.get("http://192.0.2.1/")
    seen, todo = [], [refused.value]
    while todo and len(seen) < 50:  # causes, contexts and (happy eyeballs) exception groups
        error = todo.pop()
        seen.append(error)
        todo += [e for e in (error.__cause__, error.__context__) if e is not None]
        todo += list(getattr(error, "exceptions", ()))
    assert any(isinstance(e, SocketConnectBlockedError) for e in seen), [repr(e) for e in seen]


def test_loopback_stays_open():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname(), timeout=5):
            pass
