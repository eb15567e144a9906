"""`tapebot run`'s first database connection, retried with backoff while a database server is
still coming up (a compose stack, a host's boot), instead of exiting at the first refusal.

Only what can get better by waiting is retried: no answer (refused, no route, the name not yet
resolvable, a timeout) and the server saying it is starting or full (SQLSTATE classes 08, 57, 53).
A wrong password or a missing database fails at once: waiting would only hide it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from agent import StorageError

log = logging.getLogger("tapebot.db")

WAIT_BOUND_S = 120.0  # then `tapebot run` exits (status 1) and the container engine restarts it
FIRST_DELAY_S = 1.0
MAX_DELAY_S = 10.0
ATTEMPT_TIMEOUT_S = 10.0  # the drivers' own connect timeouts are a minute
_TRANSIENT_SQLSTATE_CLASSES = ("08", "57", "53")


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE a driver attached anywhere in the exception's chain (asyncpg and psycopg both
    name it `sqlstate`), or None when the server never answered."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        for candidate in (cur, getattr(cur, "orig", None)):
            code = getattr(candidate, "sqlstate", None)
            if isinstance(code, str) and code:
                return code
        cur = cur.__cause__ or cur.__context__
    return None


def transient(exc: BaseException) -> bool:
    code = sqlstate(exc)
    return code is None or code[:2] in _TRANSIENT_SQLSTATE_CLASSES


def _describe(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    text = " ".join(str(orig).split())[:300]
    return f"{type(orig).__name__}: {text}" if text else type(orig).__name__


def masked(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


async def ping(url: str) -> None:
    """One connection and `SELECT 1`, nothing pooled."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.pool import NullPool

    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with asyncio.timeout(ATTEMPT_TIMEOUT_S), engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
    finally:
        await engine.dispose()


async def wait_for_database(
    url: str,
    *,
    bound: float = WAIT_BOUND_S,
    first_delay: float = FIRST_DELAY_S,
    max_delay: float = MAX_DELAY_S,
    connect: Callable[[str], Awaitable[None]] = ping,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> int:
    """Return once the server answers (the number of attempts it took); raise StorageError, one
    line naming the URL (password masked) and the last error, when it fails for a reason waiting
    will not cure or still fails after `bound` seconds. SQLite files need no wait."""
    from memory.db import is_sqlite

    if is_sqlite(url):
        return 0
    where = masked(url)
    started = clock()
    delay = first_delay
    attempt = 0
    while True:
        attempt += 1
        try:
            await connect(url)
        except Exception as exc:  # noqa: BLE001 — sorted into transient and final right below
            why = _describe(exc)
            if not transient(exc):
                raise StorageError(f"cannot use the database at {where}: {why}") from None
            waited = clock() - started
            if waited + delay > bound:
                raise StorageError(
                    f"the database at {where} did not answer within {bound:.0f} s "
                    f"({attempt} attempts); last error: {why}"
                ) from None
            log.warning(
                "database at %s not reachable yet (attempt %d: %s); retrying in %.0f s, giving up after %.0f s",
                where,
                attempt,
                why,
                delay,
                bound,
            )
            await sleep(delay)
            delay = min(delay * 2, max_delay)
            continue
        if attempt > 1:
            log.info("database at %s answered after %d attempts (%.0f s)", where, attempt, clock() - started)
        return attempt
