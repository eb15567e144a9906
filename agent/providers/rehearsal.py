"""A model call rehearsed in-process at start, so the first reply does not pay for it: one
request and its streamed answer through the vendor SDK and our stream code, against a stand-in
transport that answers from memory.

The SDKs build much on their first call: pydantic validators of the response models (the openai
SDK defers them), the type hints their request transform walks, the SSE decoder; so do our own
request and chunk paths. A real first reply paid ~30 ms for that on top of a later reply's cost.
The rehearsal pays it at start instead, on the event loop: in a worker thread, the validators'
construction (Rust, holding the GIL) stalled the loop for up to ~100 ms at a time. It never touches the network: a
throwaway SDK client, with a dummy key and a mock transport of the SDK's own HTTP library, answers
a canned stream (the vendor client's `_rehearsal_body`). Nothing is sent and nothing is billed.

The mock transport skips the network stack, which the first real request then sets up: the HTTP
library's async backend (anyio's asyncio backend, its socket streams; ~10-15 ms of imports).
`rehearse_transport` runs one plain-HTTP request through the library's real transport to a
listener of its own on the loopback interface, so that is loaded at start too.
"""

from __future__ import annotations

import asyncio
import copy
import ssl
import sys
import threading
from types import ModuleType
from typing import Any

from agent.messages import Message, ToolCallPart, ToolResultPart
from agent.providers.base import Chunk, ModelRequest, ToolSchema

#: Where the stand-in SDK client "sends" (the mock transport answers every request itself).
STAND_IN_URL = "http://rehearsal.invalid/v1"
STAND_IN_KEY = "rehearsal-no-key"


def rehearsal_request() -> ModelRequest:
    """A request with what a turn's requests carry: system text, a user message, a tool call and
    its result, and a tool schema (the SDK walks each of their wire types once, on first use)."""
    call = ToolCallPart(id="call_rehearsal", name="rehearsal", arguments={"q": "x"})
    return ModelRequest(
        messages=[
            Message.user("rehearsal"),
            Message.assistant("", tool_calls=[call]),
            Message(
                role="tool",
                parts=(ToolResultPart(call_id=call.id, name=call.name, content="{}"),),
            ),
            Message.user("rehearsal"),
        ],
        tools=[
            ToolSchema(
                name="rehearsal",
                description="rehearsal",
                parameters={"type": "object", "properties": {"q": {"type": "string"}}},
            )
        ],
        system="rehearsal",
        system_dynamic="rehearsal",
        max_tokens=16,
        context="rehearsal",
    )


def http_library(sdk: ModuleType) -> ModuleType:
    """The HTTP library the SDK speaks through (httpx, or a fork of it): its mock transport is the
    stand-in, and the SDK accepts only that library's client."""
    base = next(c for c in sdk.DefaultAsyncHttpxClient.__mro__[1:] if c.__name__ == "AsyncClient")
    return sys.modules[base.__module__.split(".")[0]]


async def rehearse(client: Any, sdk: ModuleType) -> list[Chunk]:
    """Run `rehearsal_request()` through a copy of `client` whose SDK client answers from memory;
    the chunks it yielded. (`client` is an `agent.providers._streaming.SdkClient`, which calls
    this.)"""
    http = http_library(sdk)
    body = client._rehearsal_body()

    def answer(request: Any) -> Any:
        return http.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    stand_in = copy.copy(client)  # the real client (its key, its connections) is left untouched
    stand_in._sdk_args = {
        "api_key": STAND_IN_KEY,
        "base_url": STAND_IN_URL,
        "max_retries": 0,
        "http_client": http.AsyncClient(transport=http.MockTransport(answer)),
    }
    stand_in._sdk_client = None
    stand_in._sdk_lock = threading.Lock()

    try:
        return [chunk async for chunk in stand_in.stream(rehearsal_request())]
    finally:
        await stand_in.aclose()


async def rehearse_transport(sdk: ModuleType) -> int:
    """One plain-HTTP GET through the real transport of the SDK's HTTP library, to a listener of
    ours on 127.0.0.1 (nothing leaves the machine); the status it got. No proxy from the
    environment is used, and the TLS context trusts no certificate: nothing here speaks TLS."""
    http = http_library(sdk)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        transport = http.AsyncHTTPTransport(verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
        async with http.AsyncClient(transport=transport, trust_env=False, timeout=5.0) as loopback:
            response = await loopback.get(f"http://127.0.0.1:{port}/rehearsal")
            return int(response.status_code)
    finally:
        server.close()
        await server.wait_closed()
