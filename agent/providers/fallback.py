"""Fallback across models: the one retry loop of a model call.

Rules:
- switch to the next model only on `RetryableModelError` raised before any content chunk;
- a 429 whose `retry-after` fits under `retry_after_cap` is retried once on the same model
  after waiting (the last candidate also retries once after a short default wait);
- never on `FatalModelError` (400/401/403, quota), never after output (`StreamInterrupted`);
- a tool is never re-run here: a stream only yields tool calls, the runtime executes them.

Cooldown (a circuit breaker per model): a model that failed (5xx, connection error, a
stall past the idle timeout, a stream cut off) is skipped for `cooldown_s`, doubling while it
keeps failing (up to `max_cooldown_s`), so the next turns go straight to the fallback instead of
waiting for the same timeout every turn. Once the time is up the model is tried again; a success
closes the breaker. A model with no alternative left is always tried, and a server error or a stall
is retried once after a backoff (there is nothing else to turn to).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass

from agent.errors import RateLimited, RetryableModelError, StreamInterrupted
from agent.providers._streaming import CONTENT_CHUNKS
from agent.providers.base import Chunk, ModelClient, ModelInfo, ModelRequest

log = logging.getLogger(__name__)

# (model_from, model_to, reason) with config ids; model_from == model_to for a same-model retry.
SwitchCallback = Callable[[str, str, str], Awaitable[None] | None]


@dataclass
class _Breaker:
    failures: int = 0
    until: float = 0.0  # clock time the model may be tried again


class Cooldowns:
    """Which models are resting after a failure, by model id (can be shared between chains)."""

    def __init__(
        self, base_s: float = 60.0, max_s: float = 600.0, clock: Callable[[], float] = time.monotonic
    ):
        self.base_s, self.max_s, self.clock = base_s, max_s, clock
        self._state: dict[str, _Breaker] = {}

    def resting(self, model_id: str) -> bool:
        state = self._state.get(model_id)
        return state is not None and self.clock() < state.until

    def failed(self, model_id: str, reason: str) -> float:
        state = self._state.setdefault(model_id, _Breaker())
        state.failures += 1
        rest = min(self.max_s, self.base_s * 2.0 ** (state.failures - 1))
        state.until = self.clock() + rest
        log.warning("model %s failed (%s); skipped for %.0f s", model_id, reason, rest)
        return rest

    def succeeded(self, model_id: str) -> None:
        if self._state.pop(model_id, None) is not None:
            log.info("model %s answers again", model_id)


class FallbackClient:
    def __init__(
        self,
        clients: Sequence[ModelClient],
        on_switch: SwitchCallback | None = None,
        *,
        retry_after_cap: float = 10.0,
        default_wait: float = 1.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        cooldown_s: float = 60.0,
        max_cooldown_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
        cooldowns: Cooldowns | None = None,
    ) -> None:
        if not clients:
            raise ValueError("FallbackClient needs at least one client")
        self.clients = list(clients)
        self.on_switch = on_switch
        self.retry_after_cap = retry_after_cap
        self.default_wait = default_wait
        self._sleep = sleep
        self.cooldowns = cooldowns or Cooldowns(cooldown_s, max_cooldown_s, clock)
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

    def _wait_before_retry(self, exc: RetryableModelError, *, last: bool, alone: bool) -> float | None:
        """Seconds to wait before retrying the same model, or None to move on. `alone`: no other
        model is available to this stream."""
        if not isinstance(exc, RateLimited):
            return self.default_wait if alone else None
        if exc.retry_after is not None and exc.retry_after <= self.retry_after_cap:
            return exc.retry_after
        if last:
            return min(
                exc.retry_after if exc.retry_after is not None else self.default_wait, self.retry_after_cap
            )
        return None

    def _candidates(self) -> list[ModelClient]:
        """The clients to try, in order, without those resting after a failure; if every one
        is resting, the one whose rest ends first (never refuse to try at all)."""
        ready = [c for c in self.clients if not self.cooldowns.resting(c.info.id)]
        if ready:
            return ready
        return [min(self.clients, key=lambda c: self.cooldowns._state[c.info.id].until)]

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        last_error: RetryableModelError | None = None
        candidates = self._candidates()
        if candidates[0] is not self.clients[0]:
            log.info("model %s is resting after a failure; using %s", self.clients[0].info.id,
                     candidates[0].info.id)  # fmt: skip
        for position, client in enumerate(candidates):
            last = position == len(candidates) - 1
            alone = len(candidates) == 1
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
                    self.cooldowns.succeeded(client.info.id)
                    return
                except StreamInterrupted as exc:
                    self.cooldowns.failed(client.info.id, str(exc))
                    raise
                except RetryableModelError as exc:
                    if not isinstance(exc, RateLimited):
                        self.cooldowns.failed(client.info.id, str(exc))
                    if produced:  # defence in depth: a client that forgot to say so
                        raise StreamInterrupted(
                            f"{client.info.id}: stream failed after output was delivered ({exc})",
                            model=exc.model,
                            status=exc.status,
                        ) from exc
                    last_error = exc
                    wait = None if retried else self._wait_before_retry(exc, last=last, alone=alone)
                    if wait is None:
                        break
                    retried = True
                    await self._notify(client.info.id, client.info.id, _reason(exc))
                    await self._sleep(wait)
            if not last:
                await self._notify(client.info.id, candidates[position + 1].info.id, _reason(last_error))
        assert last_error is not None
        raise last_error


def _reason(exc: BaseException | None) -> str:
    return str(exc) if exc is not None else "unknown error"
