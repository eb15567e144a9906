"""A scripted LLM server speaking the real wire protocols, for the real SDKs to talk to.

    POST /v1/messages           Anthropic Messages (SSE with `event:` lines, or JSON)
    POST /v1/chat/completions   OpenAI Chat Completions (`data:` frames + `[DONE]`, or JSON)

Each request pops the next script entry (a per-model queue first, then the shared one, then
`default`); an entry is a `Reply`, a `Failure`, or a callable `body -> Reply | Failure`.
Every request is recorded (`requests`) so tests can assert on what the client sent.

    async with ScriptedLLMServer() as server:                    # in a test
        server.script(Reply(text="hi"), Failure(500))
        AsyncAnthropic(base_url=server.url, ...)                 # Anthropic: the host root
        AsyncOpenAI(base_url=server.openai_base_url, ...)        # OpenAI: root + "/v1"

    server = ScriptedLLMServer(); url = server.start_in_thread() # for CLI tests; server.stop()
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)  # str: raw text (may be invalid JSON)
    id: str | None = None
    fragments: int = 3  # the argument text is sent in this many pieces

    @property
    def text(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass
class Reply:
    """One successful response, optionally with injected faults."""

    text: str | list[str] = ""  # a str is split into word-sized deltas; a list is sent as given
    tool_calls: list[ToolCall] = field(default_factory=list)
    thinking: str = ""  # Anthropic thinking block / OpenAI `reasoning_content`
    signature: str = "sig-test"  # Anthropic thinking signature
    input_tokens: int = 12  # uncached input (OpenAI: prompt_tokens = input + cache_read)
    output_tokens: int = 7
    cache_read: int = 0
    cache_write: int = 0
    finish: Literal["stop", "tool_calls", "length"] | None = None  # derived when None
    # faults (content frames = text, thinking and tool-argument deltas)
    stall_before: float = 0.0  # seconds of silence before the response headers
    stall_after: int | None = None  # after this many content frames, go silent for `stall_for`
    stall_for: float = 30.0
    fail_after: int | None = None  # after this many content frames, fail mid-stream
    fail_mode: Literal["error", "disconnect", "truncate"] = "error"  # truncate: end the body cleanly
    chunk_delay: float = 0.0


@dataclass
class Failure:
    """An HTTP error response."""

    status: int
    body: dict[str, Any] | str | None = None  # default: the vendor's error shape
    retry_after: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    stall_before: float = 0.0


Entry = Reply | Failure | Callable[[dict[str, Any]], "Reply | Failure"]


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def vendor(self) -> str:
        return "anthropic" if self.path.endswith("/messages") else "openai"


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}  # fmt: skip


def _split_text(text: str | list[str]) -> list[str]:
    if isinstance(text, list):
        return [t for t in text if t]
    return re.findall(r"\S+\s*|\s+", text)


def _split_args(text: str, pieces: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, pieces)))
    return [text[i : i + size] for i in range(0, len(text), size)]


class _Closing(Exception):
    """The server is shutting down while a handler waits."""


class ScriptedLLMServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self.requests: list[RecordedRequest] = []
        self.default: Entry | None = None
        self._queue: deque[Entry] = deque()
        self._by_model: dict[str, deque[Entry]] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._closing: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # ---- scripting ----------------------------------------------------------------------------
    def script(self, *entries: Entry, model: str | None = None) -> ScriptedLLMServer:
        """Queue responses; with `model`, only requests for that model consume them."""
        with self._lock:
            queue = self._queue if model is None else self._by_model.setdefault(model, deque())
            queue.extend(entries)
        return self

    def pending(self) -> int:
        with self._lock:
            return len(self._queue) + sum(len(q) for q in self._by_model.values())

    def requests_for(self, model: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.model == model]

    def _next(self, body: dict[str, Any]) -> Reply | Failure:
        with self._lock:
            queue = self._by_model.get(str(body.get("model")))
            if queue:
                entry = queue.popleft()
            elif self._queue:
                entry = self._queue.popleft()
            elif self.default is not None:
                entry = self.default
            else:
                return Failure(
                    500, {"error": {"type": "api_error", "message": "scripted server: script exhausted"}}
                )
        return entry(body) if callable(entry) else entry

    # ---- lifecycle ----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """Base URL for Anthropic (the host root)."""
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    def base_url(self, provider: str) -> str:
        """The `base_url` a model config for `provider` ("anthropic" | "openai") needs."""
        return self.url if provider == "anthropic" else self.openai_base_url

    def script_turn_for_bench(self) -> None:
        """Queue one 3-round tool turn: two `quote` calls, one more `quote` call, a final answer."""
        self.script(
            Reply(
                text="Checking. ",
                tool_calls=[ToolCall("quote", {"code": "600519"}), ToolCall("quote", {"code": "000001"})],
            ),
            Reply(tool_calls=[ToolCall("quote", {"code": "300750"})]),
            Reply(text="600519 closed at 1480.55 as of 2025-09-03."),
        )

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/messages", self._anthropic)
        app.router.add_post("/v1/chat/completions", self._openai)
        self._closing = asyncio.Event()
        self._runner = web.AppRunner(app, shutdown_timeout=1.0, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = getattr(site, "_server", None)
        if self.port == 0 and server is not None and server.sockets:
            self.port = server.sockets[0].getsockname()[1]
        return self.url

    async def close(self) -> None:
        if self._closing is not None:
            self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> ScriptedLLMServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def start_in_thread(self) -> str:
        """Run the server on its own event loop in a daemon thread; returns the base URL."""
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self.start())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="scripted-llm-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("scripted LLM server did not start")
        return self.url

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        asyncio.run_coroutine_threadsafe(self.close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._loop = self._thread = None

    # ---- helpers ------------------------------------------------------------------------------
    async def _pause(self, seconds: float) -> None:
        if seconds <= 0:
            return
        assert self._closing is not None
        try:
            await asyncio.wait_for(self._closing.wait(), seconds)
        except TimeoutError:
            return
        raise _Closing

    async def _record(self, request: web.Request) -> dict[str, Any]:
        body = await request.json()
        self.requests.append(RecordedRequest(request.path, dict(request.headers), body))
        return body

    async def _failure(self, failure: Failure, vendor: str) -> web.Response:
        await self._pause(failure.stall_before)
        body = failure.body
        if body is None:
            kind = _ERROR_TYPES.get(failure.status, "api_error")
            message = f"scripted failure {failure.status}"
            if vendor == "anthropic":
                body = {"type": "error", "error": {"type": kind, "message": message}}
            else:
                body = {"error": {"message": message, "type": kind, "code": None}}
        headers = dict(failure.headers)
        if failure.retry_after is not None:
            headers["retry-after"] = failure.retry_after
        text = body if isinstance(body, str) else json.dumps(body)
        return web.Response(
            status=failure.status,
            reason="Overloaded" if failure.status == 529 else None,
            text=text,
            content_type="text/plain" if isinstance(body, str) else "application/json",
            headers=headers,
        )

    async def _open_sse(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        return response

    async def _before_content_frame(self, reply: Reply, count: int) -> bool:
        """Fault injection before content frame `count`; True means "fail now"."""
        if reply.chunk_delay:
            await asyncio.sleep(reply.chunk_delay)
        if reply.stall_after is not None and count == reply.stall_after:
            await self._pause(reply.stall_for)
        return reply.fail_after is not None and count == reply.fail_after

    @staticmethod
    def _finish(reply: Reply) -> str:
        return reply.finish or ("tool_calls" if reply.tool_calls else "stop")

    async def _answer(self, request: web.Request, vendor: str) -> web.StreamResponse:
        """One model call in `vendor`'s wire format: the next scripted entry, streamed or whole."""
        body = await self._record(request)
        entry = self._next(body)
        try:
            if isinstance(entry, Failure):
                return await self._failure(entry, vendor)
            await self._pause(entry.stall_before)
            if vendor == "anthropic":
                if body.get("stream"):
                    return await self._anthropic_stream(request, body, entry)
                return web.json_response(self._anthropic_message(body, entry))
            if body.get("stream"):
                return await self._openai_stream(request, body, entry)
            return web.json_response(self._openai_completion(body, entry))
        except _Closing:
            return web.Response(status=503, text="server closing")

    @staticmethod
    async def _cut(request: web.Request, response: web.StreamResponse, reply: Reply) -> bool:
        """End a failing stream the way `reply.fail_mode` says, if that is a cut (a dropped
        connection, a body ended early); False for an error frame, which is the vendor's."""
        if reply.fail_mode == "disconnect":
            _drop(request)
            return True
        if reply.fail_mode == "truncate":
            await response.write_eof()
            return True
        return False

    # ---- Anthropic ----------------------------------------------------------------------------
    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        return await self._answer(request, "anthropic")

    def _anthropic_usage(self, reply: Reply, output: int) -> dict[str, Any]:
        return {
            "input_tokens": reply.input_tokens,
            "output_tokens": output,
            "cache_creation_input_tokens": reply.cache_write,
            "cache_read_input_tokens": reply.cache_read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": reply.cache_write,
                "ephemeral_1h_input_tokens": 0,
            },
        }

    def _tool_id(self, call: ToolCall, prefix: str) -> str:
        return call.id or f"{prefix}{next(self._ids):04d}"

    def _anthropic_message(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reply.thinking:
            content.append({"type": "thinking", "thinking": reply.thinking, "signature": reply.signature})
        text = "".join(_split_text(reply.text))
        if text:
            content.append({"type": "text", "text": text})
        for call in reply.tool_calls:
            args = call.arguments if isinstance(call.arguments, dict) else {}
            content.append(
                {"type": "tool_use", "id": self._tool_id(call, "toolu_"), "name": call.name, "input": args}
            )
        stop = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}[self._finish(reply)]
        return {
            "id": f"msg_{next(self._ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", ""),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": self._anthropic_usage(reply, reply.output_tokens),
        }

    async def _anthropic_stream(
        self, request: web.Request, body: dict[str, Any], reply: Reply
    ) -> web.StreamResponse:
        response = await self._open_sse(request)

        async def send(event: str, data: dict[str, Any]) -> None:
            await response.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())

        message = {
            "id": f"msg_{next(self._ids):04d}", "type": "message", "role": "assistant",
            "model": body.get("model", ""), "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": self._anthropic_usage(reply, 1),
        }  # fmt: skip
        await send("message_start", {"type": "message_start", "message": message})
        await send("ping", {"type": "ping"})
        # (block start, [deltas], block-end extras) for each content block
        blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        if reply.thinking:
            deltas = [{"type": "thinking_delta", "thinking": t} for t in _split_text(reply.thinking)]
            deltas.append({"type": "signature_delta", "signature": reply.signature})
            blocks.append(({"type": "thinking", "thinking": "", "signature": ""}, deltas))
        pieces = _split_text(reply.text)
        if pieces:
            blocks.append(({"type": "text", "text": ""}, [{"type": "text_delta", "text": t} for t in pieces]))
        for call in reply.tool_calls:
            start = {"type": "tool_use", "id": self._tool_id(call, "toolu_"), "name": call.name, "input": {}}
            parts = _split_args(call.text, call.fragments)
            blocks.append((start, [{"type": "input_json_delta", "partial_json": p} for p in parts]))
        count = 0
        for index, (start, deltas) in enumerate(blocks):
            await send(
                "content_block_start", {"type": "content_block_start", "index": index, "content_block": start}
            )
            for delta in deltas:
                if await self._before_content_frame(reply, count):
                    return await self._anthropic_fail(request, response, send, reply)
                count += 1
                await send(
                    "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
                )
            await send("content_block_stop", {"type": "content_block_stop", "index": index})
        if await self._before_content_frame(reply, count):
            return await self._anthropic_fail(request, response, send, reply)
        stop = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}[self._finish(reply)]
        await send("message_delta", {
            "type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": reply.output_tokens},
        })  # fmt: skip
        await send("message_stop", {"type": "message_stop"})
        await response.write_eof()
        return response

    async def _anthropic_fail(
        self, request: web.Request, response: web.StreamResponse, send: Any, reply: Reply
    ) -> web.StreamResponse:
        if await self._cut(request, response, reply):
            return response
        await send("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
        await response.write_eof()
        return response

    # ---- OpenAI -------------------------------------------------------------------------------
    async def _openai(self, request: web.Request) -> web.StreamResponse:
        return await self._answer(request, "openai")

    @staticmethod
    def _openai_usage(reply: Reply) -> dict[str, Any]:
        details: dict[str, Any] = {"cached_tokens": reply.cache_read}
        if reply.cache_write:
            details["cache_write_tokens"] = reply.cache_write
        prompt = reply.input_tokens + reply.cache_read + reply.cache_write
        return {
            "prompt_tokens": prompt,
            "completion_tokens": reply.output_tokens,
            "total_tokens": prompt + reply.output_tokens,
            "prompt_tokens_details": details,
        }

    def _openai_completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(_split_text(reply.text)) or None}
        if reply.thinking:
            message["reasoning_content"] = reply.thinking
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": self._tool_id(c, "call_"),
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.text},
                }
                for c in reply.tool_calls
            ]
        return {
            "id": f"chatcmpl-{next(self._ids)}", "object": "chat.completion", "created": 1,
            "model": body.get("model", ""),
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish(reply), "logprobs": None}],
            "usage": self._openai_usage(reply),
        }  # fmt: skip

    async def _openai_stream(
        self, request: web.Request, body: dict[str, Any], reply: Reply
    ) -> web.StreamResponse:
        response = await self._open_sse(request)
        completion_id = f"chatcmpl-{next(self._ids)}"

        def frame(
            delta: dict[str, Any] | None, finish: str | None = None, usage: Any = None
        ) -> dict[str, Any]:
            choices = (
                []
                if delta is None
                else [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
            )
            return {"id": completion_id, "object": "chat.completion.chunk", "created": 1,
                    "model": body.get("model", ""), "choices": choices, "usage": usage}  # fmt: skip

        async def send(data: dict[str, Any]) -> None:
            await response.write(f"data: {json.dumps(data)}\n\n".encode())

        deltas: list[dict[str, Any]] = [{"reasoning_content": t} for t in _split_text(reply.thinking)]
        deltas += [{"content": t} for t in _split_text(reply.text)]
        for index, call in enumerate(reply.tool_calls):
            head = {"index": index, "id": self._tool_id(call, "call_"), "type": "function",
                    "function": {"name": call.name, "arguments": ""}}  # fmt: skip
            deltas.append({"tool_calls": [head]})
            deltas += [
                {"tool_calls": [{"index": index, "function": {"arguments": p}}]}
                for p in _split_args(call.text, call.fragments)
            ]
        await send(frame({"role": "assistant", "content": None}))
        for count, delta in enumerate(deltas):
            if await self._before_content_frame(reply, count):
                return await self._openai_fail(request, response, send, reply)
            await send(frame(delta))
        if await self._before_content_frame(reply, len(deltas)):
            return await self._openai_fail(request, response, send, reply)
        await send(frame({}, finish=self._finish(reply)))
        if (body.get("stream_options") or {}).get("include_usage"):
            await send(frame(None, usage=self._openai_usage(reply)))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _openai_fail(
        self, request: web.Request, response: web.StreamResponse, send: Any, reply: Reply
    ) -> web.StreamResponse:
        if await self._cut(request, response, reply):
            return response
        await send(
            {
                "error": {
                    "message": "The server had an error while processing your request.",
                    "type": "server_error",
                }
            }
        )
        await response.write_eof()
        return response


def _drop(request: web.Request) -> None:
    """Cut the connection mid-body (the client sees an incomplete chunked response)."""
    transport = request.transport
    if transport is not None:
        transport.close()
