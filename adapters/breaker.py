"""Discord's invalid-request budget, as a circuit breaker.

Discord bans an IP address (Cloudflare, about an hour) after 10,000 invalid requests — responses
401, 403 and 429, except 429s of the `shared` rate-limit scope — within 10 minutes. A bot with a
revoked token or without permission in a busy channel can get there on its own. `InvalidRequestBudget`
counts those responses over a sliding window, seen from aiohttp's trace hooks (so it also sees the
429s discord.py retries internally), and once `limit` — a tenth of Discord's by default — is
reached it refuses every further request, raising `BudgetExhausted` before anything is sent, until
the window has room again. One error is logged when it opens and one line when it closes.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import aiohttp

from adapters.base import DeliveryError

log = logging.getLogger(__name__)

DISCORD_LIMIT = 10_000  # invalid requests per window before the ban
WINDOW_S = 600.0
INVALID_STATUSES = frozenset({401, 403, 429})


class BudgetExhausted(DeliveryError):
    """Not sent: too many invalid requests to Discord recently (the ban is close)."""


class InvalidRequestBudget:
    def __init__(
        self,
        limit: int = DISCORD_LIMIT // 10,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.limit = limit
        self.window_s = window_s
        self._clock = clock
        self._seen: deque[float] = deque()
        self._open = False
        self.refused = 0  # requests not sent while open (tests, /status)

    @property
    def count(self) -> int:
        self._expire()
        return len(self._seen)

    @property
    def is_open(self) -> bool:
        self._expire()
        return self._open

    def record(self, status: int, scope: str | None = None) -> None:
        """Count one response if Discord counts it as invalid."""
        if status not in INVALID_STATUSES or (status == 429 and scope == "shared"):
            return
        self._expire()
        self._seen.append(self._clock())
        if not self._open and len(self._seen) >= self.limit:
            self._open = True
            log.error(
                "discord: %d invalid requests (401/403/429) in %.0f min; not sending anything until "
                "the count falls (Discord bans the address at %d). Check the bot token and its "
                "permissions.",
                len(self._seen),
                self.window_s / 60,
                DISCORD_LIMIT,
            )

    def check(self) -> None:
        """Raise `BudgetExhausted` while the breaker is open."""
        if self.is_open:
            self.refused += 1
            raise BudgetExhausted(
                f"discord: request not sent; {len(self._seen)} invalid requests in the last "
                f"{self.window_s / 60:.0f} min"
            )

    def _expire(self) -> None:
        cutoff = self._clock() - self.window_s
        while self._seen and self._seen[0] <= cutoff:
            self._seen.popleft()
        # Close with some room to spare, so one more burst cannot reopen it at once.
        if self._open and len(self._seen) < self.limit // 2:
            self._open = False
            log.warning("discord: invalid requests back to %d; sending again", len(self._seen))

    def trace_config(self) -> aiohttp.TraceConfig:
        """Hooks for the client's aiohttp session (`discord.Client(http_trace=...)`)."""
        config = aiohttp.TraceConfig()

        async def on_start(_session: Any, _ctx: SimpleNamespace, params: Any) -> None:
            # The gateway connection is left alone: discord.py's reconnect loop would not survive
            # an exception it does not know, and a login failure already stops the client.
            if params.headers.get("Upgrade", "").lower() != "websocket":
                self.check()

        async def on_end(_session: Any, _ctx: SimpleNamespace, params: Any) -> None:
            response = params.response
            self.record(response.status, response.headers.get("X-RateLimit-Scope"))

        config.on_request_start.append(on_start)
        config.on_request_end.append(on_end)
        return config
