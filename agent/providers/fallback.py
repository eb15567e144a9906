"""Fallback across models: the one retry loop of a model call.

Rules (DESIGN.md §2, reliability F1–F4):
- switch to the next model only on `RetryableModelError` raised before any content chunk;
- a 429 whose `retry-after` fits under `retry_after_cap` is retried once on the same model
  after waiting (the last candidate also retries once after a short default wait);
- never on `FatalModelError` (400/401/403, quota), never after output (`StreamInterrupted`);
- a tool is never re-run here: a stream only yields tool calls, the runtime executes them.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing

from agent.errors import RateLimited, RetryableModelError, StreamInterrupted
from agent.providers._streaming import CONTENT_CHUNKS
from agent.providers.base import Chunk, ModelClient, ModelInfo, ModelRequest

# (model_from, model_to, reason) with config ids; model_from == model_to for a same-model retry.
SwitchCallback = Callable[[str, str, str], Awaitable[None] | None]


class FallbackClient:
    def __init__(
        self,
        clients: Sequence[ModelClient],
        on_switch: SwitchCallback | None = None,
        *,
        retry_after_cap: float = 10.0,
        default_wait: float = 1.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if not clients:
            raise ValueError("FallbackClient needs at least one client")
        self.clients = list(clients)
        self.on_switch = on_switch
        self.retry_after_cap = retry_after_cap
        self.default_wait = default_wait
        self._sleep = sleep
        self.active: ModelClient = self.clients[0]

    @property
    def info(self) -> ModelInfo:
        """The model serving the current (or last) stream; the primary before any call. Usage
        chunks belong to this model, so cost accounting reads it after the stream."""
        return self.active.info

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()

    async def _notify(self, model_from: str, model_to: str, reason: str) -> None:
        if self.on_switch is None:
            return
        result = self.on_switch(model_from, model_to, reason)
        if inspect.isawaitable(result):
            await result

    def _wait_before_retry(self, exc: RetryableModelError, *, last: bool) -> float | None:
        """Seconds to wait before retrying the same model, or None to move on."""
        if not isinstance(exc, RateLimited):
            return None
        if exc.retry_after is not None and exc.retry_after <= self.retry_after_cap:
            return exc.retry_after
        if last:
            return min(
                exc.retry_after if exc.retry_after is not None else self.default_wait, self.retry_after_cap
            )
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        last_error: RetryableModelError | None = None
        for position, client in enumerate(self.clients):
            last = position == len(self.clients) - 1
            retried = False
            while True:
                self.active = client
                produced = False
                try:
                    async with aclosing(client.stream(request)) as chunks:  # type: ignore[type-var]
                        async for chunk in chunks:
                            if isinstance(chunk, CONTENT_CHUNKS):
                                produced = True
                            yield chunk
                    return
                except RetryableModelError as exc:
                    if produced:  # defence in depth: a client that forgot to say so
                        raise StreamInterrupted(
                            f"{client.info.id}: stream failed after output was delivered ({exc})",
                            model=exc.model,
                            status=exc.status,
                        ) from exc
                    last_error = exc
                    wait = None if retried else self._wait_before_retry(exc, last=last)
                    if wait is None:
                        break
                    retried = True
                    await self._notify(client.info.id, client.info.id, _reason(exc))
                    await self._sleep(wait)
            if not last:
                await self._notify(client.info.id, self.clients[position + 1].info.id, _reason(last_error))
        assert last_error is not None
        raise last_error


def _reason(exc: BaseException | None) -> str:
    return str(exc) if exc is not None else "unknown error"
