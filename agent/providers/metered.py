"""A model client whose calls are recorded as side calls: the model requests tapebot makes on its
own behalf (memory extraction, TaskState) rather than for a turn. Each call's usage is stored like
a turn's, under the turn id `side:<kind>:<id>`, so `tapebot usage` can count and price them apart."""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime

from agent.ports import UsageRecord
from agent.providers.base import Chunk, ModelClient, ModelRequest, UsageChunk
from agent.usage import Usage

log = logging.getLogger(__name__)

SIDE_PREFIX = "side:"


def side_kind(turn_id: str) -> str | None:
    """ "taskstate" for `side:taskstate:…`; None for a turn's own id."""
    if not turn_id.startswith(SIDE_PREFIX):
        return None
    return turn_id[len(SIDE_PREFIX) :].split(":", 1)[0] or None


class MeteredClient:
    """Wraps `inner`; after each call, `record` gets the usage it reported (once per call)."""

    def __init__(
        self,
        inner: ModelClient,
        kind: str,
        record: Callable[[UsageRecord], Awaitable[None]],
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self.inner, self.kind, self.record, self.now = inner, kind, record, now
        self.info = inner.info

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        used = Usage()
        try:
            async for chunk in self.inner.stream(request):
                if isinstance(chunk, UsageChunk):
                    used = used + chunk.usage
                yield chunk
        finally:
            await self._record(used)

    async def _record(self, used: Usage) -> None:
        info = self.inner.info
        record = UsageRecord(
            session_id=SIDE_PREFIX + self.kind,
            turn_id=f"{SIDE_PREFIX}{self.kind}:{secrets.token_hex(4)}",
            model=info.id,
            usage=used,
            cost=used.cost(info.input_per_1m, info.output_per_1m),
            created_at=self.now(),
        )
        try:
            await self.record(record)
        except Exception:  # counting must never cost the memory work its result
            log.warning("could not record a %s side call's usage", self.kind, exc_info=True)

    async def aclose(self) -> None:
        await self.inner.aclose()
