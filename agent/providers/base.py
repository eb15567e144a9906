"""The model port: one `stream()` that yields provider-neutral chunks.

Implementations live next to it (`anthropic.py`, `openai.py`, `fallback.py`, and the in-process
`scripted.py` fake). Wire dicts never leave those modules.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from agent.messages import Message, ToolCallPart
from agent.usage import Usage

# A JSON object in a vendor's wire format (request parameters, content blocks, tool arguments as
# sent): built and read only inside the provider modules, its shape is the vendor's documentation.
WireObject: TypeAlias = dict[str, Any]
# An object from a vendor SDK (its client, stream events, usage): the SDKs are imported lazily and
# read duck-typed (both are Stainless-generated with the same shapes), so no SDK type is named here.
SdkObject: TypeAlias = Any


# ---- chunks ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TextChunk:
    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True)
class ThinkingChunk:
    text: str
    signature: str | None = None
    kind: Literal["thinking_delta"] = "thinking_delta"


@dataclass(frozen=True, slots=True)
class ToolCallChunk:
    """A complete tool call (providers assemble argument fragments before yielding)."""

    call: ToolCallPart
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class UsageChunk:
    usage: Usage
    kind: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True)
class FinishChunk:
    reason: Literal["stop", "tool_calls", "length", "other"] = "stop"
    kind: Literal["finish"] = "finish"


@dataclass(frozen=True, slots=True)
class NoticeChunk:
    """Out-of-band news from a wrapper client (e.g. FallbackClient switched models); no content."""

    message: str
    model: str = ""
    reason: str = ""
    kind: Literal["notice"] = "notice"


Chunk = TextChunk | ThinkingChunk | ToolCallChunk | UsageChunk | FinishChunk | NoticeChunk


# ---- request -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ToolSchema:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    messages: list[Message]
    tools: list[ToolSchema] = field(default_factory=list)
    # `system` is the static, cacheable prefix; `system_dynamic` (skills list, date, snapshots)
    # follows it so the cache breakpoint sits on the stable part.
    system: str = ""
    system_dynamic: str = ""
    max_tokens: int = 8192
    temperature: float | None = None
    # Context for this call only (recalled memories, references, a fresh snapshot). Providers send
    # it after the newest stored message and after the cache breakpoint, so the cached prefix —
    # everything stored — is byte-identical in the next request.
    context: str = ""


@dataclass(frozen=True, slots=True)
class ModelInfo:
    id: str  # our name from config ("main")
    model: str  # the vendor's model name
    provider: str
    context_window: int = 65_536
    input_per_1m: float = 0.0
    output_per_1m: float = 0.0
    supports_reasoning: bool = False


class ModelClient(Protocol):
    info: ModelInfo

    def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]: ...

    async def aclose(self) -> None: ...
