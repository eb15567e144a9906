"""Anthropic Messages client (streaming) behind the `ModelClient` port.

Wire mapping (all of it lives here):
- system: the static `request.system` block carries `cache_control`, `request.system_dynamic`
  follows without it, so dates/snapshots never invalidate the cached prefix;
- a second, sliding breakpoint sits on the last content block of the newest message, so each
  call reads the previous call's prefix from the cache;
- consecutive tool results are merged into one user message of `tool_result` blocks;
- signed thinking blocks are sent back verbatim, unsigned ones (from other vendors) are dropped.

Chunk contract: thinking text streams as `ThinkingChunk(text)`; a block's signature arrives as
`ThinkingChunk("", signature=...)` that closes that block. Tool calls are yielded whole.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Literal

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
    from anthropic import AsyncAnthropic

_EPHEMERAL = {"type": "ephemeral"}
_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
}


class AnthropicClient(SdkClient):
    sdk_name = "anthropic"

    def __init__(
        self,
        info: ModelInfo,
        api_key: str | None,
        base_url: str | None = None,
        idle_timeout: float = 60.0,
        max_retries: int = 0,
        *,
        max_tokens: int | None = None,
        thinking: Literal["adaptive"] | int | None = None,
    ) -> None:
        """`thinking`: None (off), "adaptive" (newer models decide themselves), or a token
        budget for manual extended thinking (older models; newer ones reject budgets)."""
        self.info = info
        self.idle_timeout = idle_timeout
        self.max_tokens = max_tokens
        self.thinking = thinking
        # max_retries=0 by default: FallbackClient is the one retry loop (no retry storms).
        self._init_sdk(api_key, base_url, max_retries)

    def _make_sdk(self) -> tuple[AsyncAnthropic, tuple[type[BaseException], ...]]:
        anthropic = import_sdk("anthropic")
        return anthropic.AsyncAnthropic(**self._sdk_args), (anthropic.APIConnectionError,)

    def _warm_resources(self, sdk: SdkObject) -> None:
        sdk.messages  # noqa: B018 - the resource classes load on first access

    def _stream_event_type(self) -> SdkObject:
        return import_sdk("anthropic").types.RawMessageStreamEvent

    # ---- request ------------------------------------------------------------------------------
    def build_params(self, request: ModelRequest) -> WireObject:
        """The `messages.create` keyword arguments for `request` (public for tests and traces)."""
        max_tokens = request.max_tokens
        if self.max_tokens:
            max_tokens = min(max_tokens, self.max_tokens)
        params: WireObject = {
            "model": self.info.model,
            "max_tokens": max_tokens,
            "messages": to_wire_messages(request.messages, request.context),
        }
        system = system_blocks(request.system, request.system_dynamic)
        if system:
            params["system"] = system
        if request.tools:
            params["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        if self.thinking == "adaptive":
            params["thinking"] = {"type": "adaptive"}
        elif isinstance(self.thinking, int) and self.thinking > 0:
            budget = max(1024, self.thinking)
            params["thinking"] = {"type": "enabled", "budget_tokens": budget}
            params["max_tokens"] = max(max_tokens, budget + 1024)
        # `request.temperature` is never sent: API version 2026-10-21 (what SDK 2.x speaks)
        # removed the sampling parameters and answers them with a 400.
        return params

    # ---- response -----------------------------------------------------------------------------
    async def _stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        params = self.build_params(request)
        async with asyncio.timeout(self.idle_timeout):  # stall before the response headers
            sdk_stream = await self._client.messages.create(stream=True, **params)
        try:
            blocks: dict[int, WireObject] = {}
            usage: dict[str, int] = {}
            stop_reason: str | None = None
            complete = False
            async for event in with_idle_timeout(sdk_stream, self.idle_timeout):
                etype = event.type
                if etype == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta":
                        if delta.text:
                            yield TextChunk(delta.text)
                    elif delta.type == "input_json_delta":
                        blocks.setdefault(event.index, {"type": "tool_use"}).setdefault("json", []).append(
                            delta.partial_json
                        )
                    elif delta.type == "thinking_delta":
                        if delta.thinking:
                            yield ThinkingChunk(delta.thinking)
                    elif delta.type == "signature_delta":
                        blocks.setdefault(event.index, {"type": "thinking"})["signature"] = delta.signature
                elif etype == "content_block_start":
                    block = event.content_block
                    entry: WireObject = {"type": block.type}
                    if block.type == "tool_use":
                        entry.update(id=block.id, name=block.name, input=block.input)
                    elif block.type == "text" and block.text:
                        yield TextChunk(block.text)
                    elif block.type == "thinking":
                        if block.thinking:
                            yield ThinkingChunk(block.thinking)
                        if getattr(block, "signature", None):
                            entry["signature"] = block.signature
                    blocks[event.index] = entry
                elif etype == "content_block_stop":
                    entry = blocks.pop(event.index, {})
                    if entry.get("type") == "tool_use":
                        yield ToolCallChunk(_tool_call(entry))
                    elif entry.get("type") == "thinking" and entry.get("signature"):
                        yield ThinkingChunk("", signature=entry["signature"])
                elif etype == "message_start":
                    _merge_usage(usage, event.message.usage)
                elif etype == "message_delta":
                    _merge_usage(usage, event.usage)
                    stop_reason = event.delta.stop_reason or stop_reason
                elif etype == "message_stop":
                    complete = True
            if not complete:
                # A proxy closed the stream cleanly mid-message: the answer is truncated.
                raise RetryableModelError(
                    f"{self.info.model}: stream ended before message_stop", model=self.info.model
                )
            yield UsageChunk(
                Usage(
                    input_tokens=usage.get("input_tokens", 0),
                    output_tokens=usage.get("output_tokens", 0),
                    cache_read_tokens=usage.get("cache_read_input_tokens", 0),
                    cache_write_tokens=usage.get("cache_creation_input_tokens", 0),
                )
            )
            yield FinishChunk(_STOP_REASONS.get(stop_reason or "end_turn", "other"))  # type: ignore[arg-type]
        finally:
            await sdk_stream.close()


def _merge_usage(acc: dict[str, int], usage: SdkObject) -> None:
    # message_delta usage is cumulative and overwrites message_start; omitted fields keep theirs.
    if usage is None:
        return
    for name in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
        value = getattr(usage, name, None)
        if value is not None:
            acc[name] = value


def _tool_call(entry: WireObject) -> ToolCallPart:
    raw = "".join(entry.get("json", ()))
    if not raw:
        initial = entry.get("input")
        return ToolCallPart(id=entry.get("id", ""), name=entry.get("name", ""), arguments=dict(initial or {}))
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    arguments = parsed if isinstance(parsed, dict) else None
    return ToolCallPart(
        id=entry.get("id", ""), name=entry.get("name", ""), arguments=arguments, raw_arguments=raw
    )


# ---- wire mapping (pure functions) --------------------------------------------------------------
def system_blocks(static: str, dynamic: str) -> list[WireObject]:
    blocks: list[WireObject] = []
    if static:
        blocks.append({"type": "text", "text": static, "cache_control": _EPHEMERAL})
    if dynamic:
        blocks.append({"type": "text", "text": dynamic})
    return blocks


def _blocks_of(message: Message) -> list[WireObject]:
    blocks: list[WireObject] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ThinkingPart):
            # Unsigned thinking (another vendor's reasoning) is rejected by the API: drop it.
            if part.signature and message.role == "assistant":
                blocks.append({"type": "thinking", "thinking": part.text, "signature": part.signature})
        elif isinstance(part, ToolCallPart):
            # Invalid arguments were answered with an error and never ran; the wire needs an object.
            blocks.append(
                {"type": "tool_use", "id": part.id, "name": part.name, "input": part.arguments or {}}
            )
        elif isinstance(part, ToolResultPart):
            result: WireObject = {
                "type": "tool_result",
                "tool_use_id": part.call_id,
                "content": part.content or "(no output)",
            }
            if part.is_error:
                result["is_error"] = True
            blocks.append(result)
    return blocks


def to_wire_messages(messages: list[Message], context: str = "") -> list[WireObject]:
    """Our messages as Anthropic `messages`: tool messages become user turns, consecutive
    same-role turns are merged (tool_result blocks first, as the API requires), and the last
    block of the newest message carries the sliding cache breakpoint."""
    wire: list[WireObject] = []
    for message in messages:
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks_of(message)
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    for item in wire:
        if item["role"] == "user":
            # Stable sort: tool results first, text after.
            item["content"].sort(key=lambda b: b["type"] != "tool_result")
    if wire and wire[0]["role"] != "user":
        wire.insert(0, {"role": "user", "content": [{"type": "text", "text": "(continued)"}]})
    if wire:
        for block in reversed(wire[-1]["content"]):
            if block["type"] != "thinking":  # thinking blocks cannot carry cache_control
                block["cache_control"] = _EPHEMERAL
                break
    if context:
        # after the breakpoint: every stored message keeps the exact form later requests send
        block = {"type": "text", "text": context}
        if wire and wire[-1]["role"] == "user":
            wire[-1]["content"].append(block)
        else:
            wire.append({"role": "user", "content": [block]})
    return wire
