"""Shared plumbing for the vendor clients: error classification, the idle timeout, and the
guard that turns any failure after visible output into `StreamInterrupted`.

Both SDKs are Stainless-generated and share an exception shape (`status_code`, `response`,
`body`), so classification is duck-typed and neither SDK is imported here.
"""

from __future__ import annotations

import asyncio
import email.utils
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from typing import Any, TypeVar, get_args

from agent.errors import (
    FatalModelError,
    ModelError,
    RateLimited,
    RetryableModelError,
    StreamInterrupted,
    StreamStalled,
)
from agent.providers.base import (
    Chunk,
    ModelInfo,
    ModelRequest,
    SdkObject,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
)

T = TypeVar("T")

CONTENT_CHUNKS = (TextChunk, ThinkingChunk, ToolCallChunk)

# 429s that will not clear by waiting: retrying or failing over only burns more budget.
_QUOTA_MARKERS = ("insufficient_quota", "spend_limit", "billing", "quota exceeded", "credit balance")
# Error types an Anthropic stream can report inside a 200 response (`event: error`).
_RETRYABLE_STREAM_ERRORS = ("overloaded_error", "api_error", "rate_limit_error", "timeout_error")


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from `retry-after-ms` / `retry-after` (seconds or an HTTP date)."""
    if not headers:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
    except (TypeError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, email.utils.mktime_tz(parsed) - time.time())


def _error_type(body: object) -> str:
    """The vendor's error type/code from an error body, lowercased ("" if none)."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            return f"{inner.get('type') or ''} {inner.get('code') or ''}".strip().lower()
    return ""


def _headers_of(exc: BaseException) -> Mapping[str, str] | None:
    response = getattr(exc, "response", None)
    return getattr(response, "headers", None)


def classify(
    exc: BaseException, *, model: str, connection_errors: tuple[type[BaseException], ...] = ()
) -> ModelError | None:
    """Map an SDK/transport exception to our tree; `None` means "not a model-call failure"
    (a bug in our code), which the caller re-raises unchanged."""
    if isinstance(exc, ModelError):
        return exc
    detail = f"{type(exc).__name__}: {exc}"[:500]
    if isinstance(exc, TimeoutError):
        return StreamStalled(f"{model}: no response within the idle timeout", model=model)
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and status >= 400:
        text = f"{_error_type(getattr(exc, 'body', None))} {exc}".lower()
        if status == 429:
            if any(marker in text for marker in _QUOTA_MARKERS):
                return FatalModelError(
                    f"{model}: quota or spend limit reached ({detail})", model=model, status=status
                )
            return RateLimited(
                f"{model}: rate limited ({detail})",
                model=model,
                retry_after=parse_retry_after(_headers_of(exc)),
            )
        if status in (408, 409) or status >= 500:
            return RetryableModelError(
                f"{model}: server error {status} ({detail})", model=model, status=status
            )
        return FatalModelError(
            f"{model}: request refused with {status} ({detail})", model=model, status=status
        )
    if isinstance(status, int):
        # An error event inside a 200 stream (Anthropic `event: error`).
        kind = _error_type(getattr(exc, "body", None))
        if kind and not any(k in kind for k in _RETRYABLE_STREAM_ERRORS):
            return FatalModelError(f"{model}: stream error ({detail})", model=model, status=status)
        if "rate_limit" in kind:
            return RateLimited(f"{model}: rate limited ({detail})", model=model, status=status)
        return RetryableModelError(f"{model}: stream error ({detail})", model=model, status=status)
    if connection_errors and isinstance(exc, connection_errors):
        return RetryableModelError(f"{model}: connection failed ({detail})", model=model)
    if isinstance(exc, OSError):
        return RetryableModelError(f"{model}: connection failed ({detail})", model=model)
    if hasattr(exc, "request") and hasattr(exc, "body"):
        # An SDK APIError without a status: an `{"error": ...}` frame in an OpenAI stream.
        return RetryableModelError(f"{model}: stream error ({detail})", model=model)
    return None


async def with_idle_timeout(source: AsyncIterator[T], timeout: float) -> AsyncIterator[T]:
    """Re-yield `source`, raising TimeoutError when it produces nothing for `timeout` seconds.
    Applied to SDK events (not our chunks): a long tool-call argument stream is alive even
    though it yields no chunk until the call is complete."""
    iterator = aiter(source)
    while True:
        try:
            async with asyncio.timeout(timeout):
                item = await anext(iterator)
        except StopAsyncIteration:
            return
        yield item


async def guarded(
    inner: AsyncIterator[Chunk], *, model: str, connection_errors: tuple[type[BaseException], ...] = ()
) -> AsyncIterator[Chunk]:
    """Classify failures of `inner`. Once a content chunk has been yielded, every failure is
    `StreamInterrupted`: the caller already showed that output, so nobody may replay it."""
    produced = False
    async with aclosing(inner) as chunks:  # type: ignore[type-var]
        try:
            async for chunk in chunks:
                if isinstance(chunk, CONTENT_CHUNKS):
                    produced = True
                yield chunk
        except Exception as exc:
            if produced:
                if isinstance(exc, StreamInterrupted):
                    raise
                kind = "stalled" if isinstance(exc, TimeoutError | StreamStalled) else "failed"
                raise StreamInterrupted(
                    f"{model}: stream {kind} after output was delivered ({type(exc).__name__}: {exc})"[:600],
                    model=model,
                    status=getattr(exc, "status_code", None)
                    if isinstance(getattr(exc, "status_code", None), int)
                    else None,
                ) from exc
            mapped = classify(exc, model=model, connection_errors=connection_errors)
            if mapped is None or mapped is exc:
                raise
            raise mapped from exc


def complete_models(root: Any) -> int:
    """Build the pydantic validators of `root` (a model class, or a union of them) and of every
    model its fields name, recursively; returns how many were built. The SDKs declare their models
    with `defer_build`, so each is built on its first use: for a stream's chunk types that is the
    first reply (~9 ms of CPU for OpenAI's `ChatCompletionChunk` and its parts)."""
    from pydantic import BaseModel

    seen: set[type[BaseModel]] = set()
    todo = [root]
    while todo:
        tp = todo.pop()
        todo.extend(get_args(tp))
        if isinstance(tp, type) and issubclass(tp, BaseModel) and tp not in seen:
            seen.add(tp)
            todo.extend(f.annotation for f in tp.model_fields.values())
    built = 0
    for model in seen:
        if not model.__pydantic_complete__:
            model.model_rebuild()
            built += 1
    return built


class SdkClient(ABC):
    """What both vendor clients share: the SDK client is built on first use (importing an SDK
    costs start-up time and ~20 MB a process that never calls this model should not pay), and
    `stream()` wraps the vendor's `_stream()` in the shared error classification and idle guard."""

    info: ModelInfo
    _sdk_args: dict[str, Any]
    #: the vendor SDK's module name (`agent.providers.sdkload.import_sdk`)
    sdk_name: str

    def _init_sdk(self, api_key: str | None, base_url: str | None, max_retries: int) -> None:
        if api_key is None and base_url:
            api_key = "not-needed"  # local servers and proxies accept anything; the SDKs insist on one
        self._sdk_args = {"api_key": api_key, "base_url": base_url, "max_retries": max_retries}
        self._sdk_client: SdkObject = None
        self._connection_errors: tuple[type[BaseException], ...] = ()
        self._sdk_lock = threading.Lock()  # `warm` builds it in a worker thread; a call may race it

    @abstractmethod
    def _make_sdk(self) -> tuple[SdkObject, tuple[type[BaseException], ...]]:
        """The vendor's SDK client and its connection-error types."""

    def _warm_resources(self, sdk: SdkObject) -> None:  # noqa: B027 - optional hook
        """Touch what the SDK loads on a client's first call (e.g. its resource modules)."""

    @property
    def _client(self) -> SdkObject:
        if self._sdk_client is None:
            with self._sdk_lock:
                if self._sdk_client is None:
                    sdk, self._connection_errors = self._make_sdk()
                    self._sdk_client = sdk
        return self._sdk_client

    def warm(self) -> None:
        """Build the SDK client and load what its first call would (called in a worker thread
        when `tapebot run` starts, so the first reply pays none of it)."""
        self._warm_resources(self._client)
        complete_models(self._stream_event_type())

    def _stream_event_type(self) -> SdkObject:
        """The type the vendor's stream parses each event into (its pydantic models)."""
        return None

    async def aclose(self) -> None:
        if self._sdk_client is not None:
            await self._sdk_client.close()

    @abstractmethod
    def _stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """The vendor's raw chunk stream for one request."""

    def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        self._client  # noqa: B018 - builds the SDK client and its error types
        return guarded(
            self._stream(request), model=self.info.model, connection_errors=self._connection_errors
        )
