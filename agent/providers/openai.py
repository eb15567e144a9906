"""OpenAI-compatible Chat Completions client (streaming) behind the `ModelClient` port.

One client serves OpenAI, DeepSeek, Qwen, Kimi, Gemini's OpenAI endpoint, Ollama and vLLM, so it
carries the compatibility work:
- `stream_options` / `tool_choice` are dropped when the endpoint rejects them (and the downgrade
  is remembered once a downgraded call succeeds);
- `reasoning_content` deltas become thinking chunks and are echoed back on assistant messages;
- models that write `<tool_call>{...}</tool_call>` into their text get those parsed as tool calls,
  and the tags never reach the visible stream.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent.errors import RetryableModelError
from agent.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from agent.providers._streaming import SdkClient, with_idle_timeout
from agent.providers.base import (
    Chunk,
    FinishChunk,
    ModelInfo,
    ModelRequest,
    SdkObject,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageChunk,
    WireObject,
)
from agent.providers.sdkload import import_sdk
from agent.usage import Usage

if TYPE_CHECKING:
    from openai import AsyncOpenAI

_FINISH = {"stop": "stop", "tool_calls": "tool_calls", "function_call": "tool_calls", "length": "length"}
_BAD_REQUEST = (400, 422)


@dataclass
class _Compat:
    """What this endpoint accepts; starts optimistic and only ever downgrades."""

    stream_options: bool = True
    tool_choice: bool = True
    temperature: bool = True
    token_param: str = "max_tokens"
    verified: bool = False  # a call with these settings succeeded at least once


class OpenAICompatClient(SdkClient):
    sdk_name = "openai"

    def __init__(
        self,
        info: ModelInfo,
        api_key: str | None,
        base_url: str | None = None,
        idle_timeout: float = 60.0,
        max_retries: int = 0,
        *,
        max_tokens: int | None = None,
    ) -> None:
        self.info = info
        self.idle_timeout = idle_timeout
        self.max_tokens = max_tokens
        self.compat = _Compat()
        # max_retries=0 by default: FallbackClient is the one retry loop (no retry storms).
        self._init_sdk(api_key, base_url, max_retries)

    def _make_sdk(self) -> tuple[AsyncOpenAI, tuple[type[BaseException], ...]]:
        openai = import_sdk("openai")
        return openai.AsyncOpenAI(**self._sdk_args), (openai.APIConnectionError,)

    def _warm_resources(self, sdk: SdkObject) -> None:
        sdk.chat.completions  # noqa: B018 - the resource classes load on first access

    def _stream_event_type(self) -> SdkObject:
        return import_sdk("openai").types.chat.ChatCompletionChunk

    # ---- request ------------------------------------------------------------------------------
    def build_params(self, request: ModelRequest, compat: _Compat | None = None) -> WireObject:
        compat = compat or self.compat
        max_tokens = request.max_tokens
        if self.max_tokens:
            max_tokens = min(max_tokens, self.max_tokens)
        params: WireObject = {
            "model": self.info.model,
            "messages": to_wire_messages(
                request.messages, request.system, request.system_dynamic, request.context
            ),
            "stream": True,
            compat.token_param: max_tokens,
        }
        if compat.stream_options:
            params["stream_options"] = {"include_usage": True}
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in request.tools
            ]
            if compat.tool_choice:
                params["tool_choice"] = "auto"
        if request.temperature is not None and compat.temperature:
            params["temperature"] = request.temperature
        return params

    async def _open(self, request: ModelRequest) -> SdkObject:
        """Start the stream, downgrading what a 400 says (or seems to say) the endpoint rejects.
        A downgrade is kept only if the downgraded call then succeeds, so a 400 with another
        cause (e.g. a too-long prompt) does not permanently strip usage reporting."""
        compat = _Compat(**vars(self.compat))
        first_error: BaseException | None = None
        for _ in range(5):
            params = self.build_params(request, compat)
            try:
                async with asyncio.timeout(self.idle_timeout):  # stall before the response headers
                    sdk_stream = await self._client.chat.completions.create(**params)
            except Exception as exc:
                if getattr(exc, "status_code", None) not in _BAD_REQUEST:
                    raise
                first_error = first_error or exc
                if not _downgrade(compat, str(exc).lower(), params):
                    raise first_error from None
                continue
            compat.verified = True
            self.compat = compat
            return sdk_stream
        assert first_error is not None
        raise first_error

    # ---- response -----------------------------------------------------------------------------
    async def _stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        sdk_stream = await self._open(request)
        try:
            calls: dict[int, _PendingCall] = {}
            tags = ToolTagFilter()
            usage: SdkObject = None
            finish: str | None = None
            async for chunk in with_idle_timeout(sdk_stream, self.idle_timeout):
                if getattr(chunk, "usage", None) is not None:
                    usage = chunk.usage  # some endpoints repeat it cumulatively: keep the last
                for choice in chunk.choices or ():
                    if choice.index not in (0, None):
                        continue
                    delta = choice.delta
                    if delta is not None:
                        reasoning = getattr(delta, "reasoning_content", None) or getattr(
                            delta, "reasoning", None
                        )
                        if isinstance(reasoning, str) and reasoning:
                            yield ThinkingChunk(reasoning)
                        if delta.content:
                            visible = tags.feed(delta.content)
                            if visible:
                                yield TextChunk(visible)
                        for fragment in delta.tool_calls or ():
                            _accumulate(calls, fragment)
                    if choice.finish_reason:
                        finish = choice.finish_reason
            if finish is None:
                # No finish_reason: the body ended mid-answer (a proxy closed it cleanly).
                raise RetryableModelError(
                    f"{self.info.model}: stream ended without a finish_reason", model=self.info.model
                )
            rest = tags.flush()
            if rest:
                yield TextChunk(rest)
            tool_calls = [calls[i].part() for i in sorted(calls)] or tags.calls
            for call in tool_calls:
                yield ToolCallChunk(call)
            yield UsageChunk(_usage(usage))
            reason = "tool_calls" if tool_calls else _FINISH.get(finish or "stop", "other")
            yield FinishChunk(reason)  # type: ignore[arg-type]
        finally:
            await sdk_stream.close()


def _downgrade(compat: _Compat, message: str, params: WireObject) -> bool:
    """Relax one setting for the next attempt; False when nothing is left to relax."""
    if "max_completion_tokens" in message and compat.token_param == "max_tokens":
        compat.token_param = "max_completion_tokens"
    elif "temperature" in message and "temperature" in params:
        compat.temperature = False
    elif ("stream_options" in message or "include_usage" in message) and compat.stream_options:
        compat.stream_options = False
    elif "tool_choice" in message and "tool_choice" in params:
        compat.tool_choice = False
    elif compat.verified:
        return False  # these settings worked before: the 400 is about something else
    elif compat.stream_options:
        compat.stream_options = False
    elif "tool_choice" in params:
        compat.tool_choice = False
    else:
        return False
    return True


@dataclass
class _PendingCall:
    id: str = ""
    name: str = ""
    fragments: list[str] = field(default_factory=list)

    def part(self) -> ToolCallPart:
        return make_call(self.id or _new_call_id(), self.name, "".join(self.fragments))


def _accumulate(calls: dict[int, _PendingCall], fragment: SdkObject) -> None:
    index = fragment.index
    if index is None:  # some endpoints omit it: a new id starts a new call
        known = {c.id for c in calls.values()}
        index = len(calls) if (fragment.id and fragment.id not in known) or not calls else max(calls)
    pending = calls.setdefault(index, _PendingCall())
    if fragment.id and not pending.id:
        pending.id = fragment.id
    function = fragment.function
    if function is not None:
        if function.name and not pending.name:
            pending.name = function.name
        if function.arguments:
            pending.fragments.append(function.arguments)


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"


def make_call(call_id: str, name: str, raw: str | WireObject | None) -> ToolCallPart:
    """A ToolCallPart from raw argument text; anything but a JSON object gives arguments=None."""
    if isinstance(raw, dict):
        return ToolCallPart(
            id=call_id, name=name, arguments=raw, raw_arguments=json.dumps(raw, ensure_ascii=False)
        )
    text = raw or ""
    if not text.strip():
        return ToolCallPart(id=call_id, name=name, arguments={}, raw_arguments=text)
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    return ToolCallPart(
        id=call_id, name=name, arguments=parsed if isinstance(parsed, dict) else None, raw_arguments=text
    )


def _usage(usage: SdkObject) -> Usage:
    if usage is None:
        return Usage()
    prompt = usage.prompt_tokens or 0
    details = getattr(usage, "prompt_tokens_details", None)
    cached = (getattr(details, "cached_tokens", None) if details else None) or 0
    written = (getattr(details, "cache_write_tokens", None) if details else None) or 0
    if not cached:
        cached = getattr(usage, "prompt_cache_hit_tokens", None) or 0  # DeepSeek's own field
    return Usage(
        input_tokens=max(0, prompt - cached - written),
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=cached,
        cache_write_tokens=written,
    )


# ---- <tool_call> text parsing -------------------------------------------------------------------
OPEN_TAG, CLOSE_TAG = "<tool_call>", "</tool_call>"


def _partial_suffix(text: str, marker: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of `marker`."""
    for size in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-size:]):
            return size
    return 0


class ToolTagFilter:
    """Streams text through, holding back anything that may be a `<tool_call>` block.
    Parsed blocks land in `calls`; blocks that do not parse are released as plain text."""

    def __init__(self) -> None:
        self.calls: list[ToolCallPart] = []
        self._buffer = ""
        self._inside = False

    def feed(self, text: str) -> str:
        self._buffer += text
        out: list[str] = []
        while True:
            if not self._inside:
                start = self._buffer.find(OPEN_TAG)
                if start >= 0:
                    out.append(self._buffer[:start])
                    self._buffer = self._buffer[start + len(OPEN_TAG) :]
                    self._inside = True
                    continue
                keep = _partial_suffix(self._buffer, OPEN_TAG)
                out.append(self._buffer[: len(self._buffer) - keep])
                self._buffer = self._buffer[len(self._buffer) - keep :]
                break
            end = self._buffer.find(CLOSE_TAG)
            if end < 0:
                break
            inner, self._buffer = self._buffer[:end], self._buffer[end + len(CLOSE_TAG) :]
            self._inside = False
            call = _parse_tag(inner)
            if call is None:
                out.append(OPEN_TAG + inner + CLOSE_TAG)
            else:
                self.calls.append(call)
        return "".join(out)

    def flush(self) -> str:
        """Whatever is still held at the end of the stream (an unterminated tag stays text)."""
        text = OPEN_TAG + self._buffer if self._inside else self._buffer
        self._buffer, self._inside = "", False
        return text


def _parse_tag(inner: str) -> ToolCallPart | None:
    try:
        obj = json.loads(inner.strip())
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    given_id = obj.get("id")
    call_id: str = given_id if isinstance(given_id, str) and given_id else _new_call_id()
    if isinstance(args, str | dict):
        return make_call(call_id, obj["name"], args)
    return ToolCallPart(id=call_id, name=obj["name"], arguments=None, raw_arguments=json.dumps(args))


# ---- wire mapping -------------------------------------------------------------------------------
def to_wire_messages(
    messages: list[Message], system: str = "", system_dynamic: str = "", context: str = ""
) -> list[WireObject]:
    wire: list[WireObject] = []
    # One system message: several endpoints' chat templates reject a second one.
    system_text = "\n\n".join(s for s in (system, system_dynamic) if s)
    if system_text:
        wire.append({"role": "system", "content": system_text})
    for message in messages:
        if message.role == "assistant":
            text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
            calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
            entry: WireObject = {"role": "assistant", "content": text or None}
            if calls:
                entry["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        # Invalid arguments never ran; send valid JSON so strict templates accept it.
                        "function": {
                            "name": c.name,
                            "arguments": json.dumps(c.arguments or {}, ensure_ascii=False),
                        },
                    }
                    for c in calls
                ]
            # DeepSeek wants its reasoning echoed; signed (Anthropic) thinking is not ours to send.
            reasoning = "".join(
                p.text for p in message.parts if isinstance(p, ThinkingPart) and not p.signature
            )
            if reasoning:
                entry["reasoning_content"] = reasoning
            if text or calls:
                wire.append(entry)
            continue
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                content = part.content or "(no output)"
                if part.is_error and not content.lower().startswith("error"):
                    content = f"Error: {content}"
                wire.append({"role": "tool", "tool_call_id": part.call_id, "content": content})
        if message.role == "user":
            text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
            if text:
                wire.append({"role": "user", "content": text})
    if context:  # last, so the endpoint's automatic prefix cache covers everything stored
        wire.append({"role": "user", "content": context})
    return wire
