"""Retrying an outbound platform call through transient faults (5xx, network errors, timeouts).

Each adapter decides which failures are worth another attempt and whether the call is safe to
repeat: an edit is (a repeat is "not modified"), a Discord message create is (it carries a nonce
Discord deduplicates), a Telegram send only when the first attempt surely did not land (the Bot API
has no idempotency key and no way to ask afterwards). This module owns the schedule: exponential
backoff with jitter, a cap on attempts and a total budget in seconds on the injected clock.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int = 5  # in all, the first one included
    base_delay: float = 0.5
    max_delay: float = 8.0
    budget_s: float = 45.0  # time spent waiting between attempts, at most

    def delay(self, attempt: int) -> float:
        """Wait before attempt `attempt + 1` (1-based `attempt` failed): backoff with ±25% jitter."""
        raw = min(self.max_delay, self.base_delay * 2.0 ** (attempt - 1))
        return raw * random.uniform(0.75, 1.25)


DEFAULT_POLICY = RetryPolicy()


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    retryable: Callable[[BaseException], bool],
    what: str,
    policy: RetryPolicy = DEFAULT_POLICY,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """`await call()`, again after a backoff while it raises something `retryable`, until it
    succeeds, the attempts run out or the next wait would overrun the budget; then the last error
    is raised unchanged."""
    waited = 0.0
    attempt = 0
    while True:
        attempt += 1
        try:
            return await call()
        except Exception as exc:
            if not retryable(exc) or attempt >= policy.attempts:
                raise
            wait = policy.delay(attempt)
            if waited + wait > policy.budget_s:
                raise
            log.warning("%s failed (%s); retrying in %.1f s (attempt %d/%d)",
                        what, exc, wait, attempt + 1, policy.attempts)  # fmt: skip
            started = clock()
            await sleep(wait)
            waited += max(wait, clock() - started)
