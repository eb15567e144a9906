"""Outbound flood control for the Telegram Bot API (a python-telegram-bot `BaseRateLimiter`).

Like PTB's AIORateLimiter (30 requests/s overall for chat-bound requests, 20/min per group), but:
- the sleep is injectable, so tests of 429 handling don't wait;
- a 429's `retry_after` pauses every request (Telegram's flood wait is per bot) and the request is
  retried up to `max_retries` times; longer waits than `max_wait` are raised instead of slept;
- typing indicators skip the per-group budget and are never retried (they are cosmetic).

Private chats have no budget of their own, as in PTB: Telegram tolerates short bursts there (a long
answer's chunks), streamed edits keep to about one a second per chat (`edit_interval`), and a 429
is waited out like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dtm
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from aiolimiter import AsyncLimiter
from telegram.error import RetryAfter
from telegram.ext import BaseRateLimiter

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[Any]]


def retry_after_seconds(exc: RetryAfter) -> float:
    value = getattr(exc, "_retry_after", None)
    if value is None:  # pragma: no cover - older PTB
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dtm.timedelta) else float(value)


class FloodLimiter(BaseRateLimiter[int]):
    def __init__(
        self,
        *,
        overall_per_second: float | None = 30,
        group_per_minute: float | None = 20,
        max_retries: int = 3,
        max_wait: float = 120.0,
        sleep: Sleep = asyncio.sleep,
    ):
        self._overall = AsyncLimiter(overall_per_second, 1) if overall_per_second else None
        self._group_rate = group_per_minute
        self._groups: dict[int | str, AsyncLimiter] = {}
        self.max_retries = max_retries
        self.max_wait = max_wait
        self._sleep = sleep
        self._resume = asyncio.Event()
        self._resume.set()
        self.retries = 0  # observable in tests and /status

    async def initialize(self) -> None:
        pass

    async def shutdown(self) -> None:
        pass

    def _group(self, chat_id: int | str) -> AsyncLimiter | None:
        if not self._group_rate:
            return None
        if len(self._groups) > 512:
            for k, lim in list(self._groups.items()):
                if lim.has_capacity(lim.max_rate):
                    del self._groups[k]
        if chat_id not in self._groups:
            self._groups[chat_id] = AsyncLimiter(self._group_rate, 60)
        return self._groups[chat_id]

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, bool | dict[str, Any] | list[dict[str, Any]]]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: int | None,
    ) -> bool | dict[str, Any] | list[dict[str, Any]]:
        chat_id = data.get("chat_id")
        if type(chat_id) is not int:  # (a plain try: this runs for every request)
            try:
                chat_id = int(chat_id)  # type: ignore[arg-type]
            except (ValueError, TypeError):
                pass
        cosmetic = endpoint == "sendChatAction"
        is_group = (isinstance(chat_id, int) and chat_id < 0) or isinstance(chat_id, str)
        retries = 0 if cosmetic else (rate_limit_args if rate_limit_args is not None else self.max_retries)
        attempt = 0
        while True:
            await self._resume.wait()
            overall = self._overall if (chat_id is not None and self._overall) else None
            group = self._group(chat_id) if (is_group and not cosmetic) else None  # type: ignore[arg-type]
            try:
                if group is None and overall is None:  # no budget to take (lifted limits)
                    return await callback(*args, **kwargs)
                async with group or contextlib.nullcontext(), overall or contextlib.nullcontext():
                    return await callback(*args, **kwargs)
            except RetryAfter as exc:
                wait = retry_after_seconds(exc)
                if attempt >= retries or wait > self.max_wait:
                    raise
                attempt += 1
                self.retries += 1
                log.warning(
                    "Telegram flood control on %s: waiting %.1f s (retry %d/%d)",
                    endpoint,
                    wait,
                    attempt,
                    retries,
                )
                self._resume.clear()
                try:
                    await self._sleep(wait + 0.1)
                finally:
                    self._resume.set()
