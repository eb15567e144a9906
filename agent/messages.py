"""Provider-neutral conversation values.

A `Message` is a role plus a tuple of parts. Wire dicts for a vendor exist only inside
`agent/providers/<vendor>.py`; everything else speaks these types. They are immutable so a
compaction copy or a provider request can never mutate the stored history by accident.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter

from agent.text import scrub, scrub_json

# Stored text is always encodable: a lone surrogate that got past the edges is replaced here.
CleanStr = Annotated[str, AfterValidator(scrub)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_Frozen):
    kind: Literal["text"] = "text"
    text: CleanStr


class ThinkingPart(_Frozen):
    kind: Literal["thinking"] = "thinking"
    text: CleanStr
    # Anthropic signs thinking blocks; DeepSeek-style endpoints want `reasoning_content` echoed.
    signature: str | None = None


class ToolCallPart(_Frozen):
    kind: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    # `None` when the model sent arguments that are not a JSON object: the call is answered with an
    # error and never executed (never silently turned into `{}`).
    arguments: Annotated[dict[str, Any] | None, AfterValidator(scrub_json)] = None
    raw_arguments: CleanStr = ""

    @property
    def arguments_text(self) -> str:
        if self.arguments is None:
            return self.raw_arguments
        return json.dumps(self.arguments, sort_keys=True, ensure_ascii=False)


class ToolResultPart(_Frozen):
    kind: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    content: CleanStr
    is_error: bool = False


Part = Annotated[TextPart | ThinkingPart | ToolCallPart | ToolResultPart, Field(discriminator="kind")]

Role = Literal["user", "assistant", "tool"]


class Message(_Frozen):
    """One conversation message. `meta` carries runtime flags that never reach a provider
    (e.g. `internal_retry`, `notification`, `archive_ref`, `anchor`)."""

    role: Role
    parts: tuple[Part, ...]
    meta: dict[str, Any] = Field(default_factory=dict)

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def user(cls, text: str, **meta: Any) -> Message:
        return cls(role="user", parts=(TextPart(text=text),), meta=meta)

    @classmethod
    def assistant(
        cls,
        text: str = "",
        tool_calls: tuple[ToolCallPart, ...] | list[ToolCallPart] = (),
        thinking: tuple[ThinkingPart, ...] | list[ThinkingPart] = (),
        **meta: Any,
    ) -> Message:
        parts: list[Any] = list(thinking)
        if text:
            parts.append(TextPart(text=text))
        parts.extend(tool_calls)
        return cls(role="assistant", parts=tuple(parts), meta=meta)

    @classmethod
    def tool_result(
        cls, call_id: str, name: str, content: str, is_error: bool = False, **meta: Any
    ) -> Message:
        return cls(
            role="tool",
            parts=(ToolResultPart(call_id=call_id, name=name, content=content, is_error=is_error),),
            meta=meta,
        )

    # -- views --------------------------------------------------------------------------------
    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    @property
    def tool_results(self) -> list[ToolResultPart]:
        return [p for p in self.parts if isinstance(p, ToolResultPart)]

    @property
    def thinking(self) -> list[ThinkingPart]:
        return [p for p in self.parts if isinstance(p, ThinkingPart)]


_MESSAGES = TypeAdapter(list[Message])


def dump_messages(messages: list[Message]) -> list[dict[str, Any]]:
    dumped: list[dict[str, Any]] = _MESSAGES.dump_python(messages, mode="json")  # pydantic returns Any
    return dumped


def load_messages(data: list[dict[str, Any]]) -> list[Message]:
    return _MESSAGES.validate_python(data)


def unanswered_calls(messages: list[Message]) -> list[ToolCallPart]:
    """Tool calls of the last assistant message that have no result yet."""
    answered: set[str] = set()
    for msg in reversed(messages):
        if msg.role == "tool":
            answered.update(r.call_id for r in msg.tool_results)
        elif msg.role == "assistant":
            return [c for c in msg.tool_calls if c.id not in answered]
        else:
            return []
    return []
