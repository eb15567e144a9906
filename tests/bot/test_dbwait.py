"""`tapebot run`'s first database connection waits for a server that is still starting: retried
with backoff (logged, bounded) while nothing answers, and failed at once when waiting cannot help."""

from __future__ import annotations

import asyncio
import logging

import pytest
from sqlalchemy.engine import make_url

from agent.errors import StorageError
from bot.dbwait import sqlstate, transient, wait_for_database
from tests.fakes.clock import FakeClock
from tests.fakes.late_tcp import LateProxy
from tests.pg import PG_URL

needs_pg = pytest.mark.skipif(not PG_URL, reason="TAPEBOT_TEST_POSTGRES_URL is not set")


class _ServerSaid(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(f"server said {code}")
        self.sqlstate = code


class _Wrapped(Exception):
    """As SQLAlchemy wraps a driver's error: the driver's in `.orig`."""

    def __init__(self, orig: BaseException) -> None:
        super().__init__(str(orig))
        self.orig = orig


def test_what_waiting_can_cure():
    assert transient(ConnectionRefusedError(111, "refused"))
    assert transient(OSError("Name or service not known"))
    assert transient(TimeoutError())
    assert transient(_Wrapped(_ServerSaid("57P03")))  # the database system is starting up
    assert transient(_Wrapped(_ServerSaid("53300")))  # too many connections
    assert not transient(_Wrapped(_ServerSaid("28P01")))  # password authentication failed
    assert not transient(_Wrapped(_ServerSaid("3D000")))  # database does not exist
    chained = RuntimeError("outer")
    chained.__cause__ = _ServerSaid("28000")
    assert sqlstate(chained) == "28000"


async def test_gives_up_after_the_bound_with_one_line_and_no_password():
    clock = FakeClock(monotonic=0.0)

    async def refused(_url: str) -> None:
        raise ConnectionRefusedError(111, "Connect call failed ('10.0.0.9', 5432)")

    url = "postgresql+asyncpg://tapebot:s3cret-pw@db:5432/tapebot"
    with pytest.raises(StorageError) as info:
        await wait_for_database(url, bound=60, connect=refused, clock=clock.monotonic, sleep=clock.sleep)
    text = str(info.value)
    assert "did not answer within 60 s" in text and "ConnectionRefusedError" in text
    assert "s3cret-pw" not in text and "\n" not in text
    assert clock.sleeps == [1, 2, 4, 8, 10, 10, 10, 10]  # backoff, capped, stopping before the bound
    assert clock.monotonic() <= 60


async def test_a_final_error_is_not_retried():
    clock = FakeClock(monotonic=0.0)

    async def wrong_password(_url: str) -> None:
        raise _Wrapped(_ServerSaid("28P01"))

    with pytest.raises(StorageError, match="cannot use the database"):
        await wait_for_database(
            "postgresql+asyncpg://u:p@h/db", connect=wrong_password, clock=clock.monotonic, sleep=clock.sleep
        )
    assert clock.sleeps == []


async def test_sqlite_needs_no_wait(tmp_path):
    async def never(_url: str) -> None:
        raise AssertionError("no connection attempt for a SQLite file")

    assert await wait_for_database(f"sqlite+aiosqlite:///{tmp_path / 'x.db'}", connect=never) == 0


@needs_pg
async def test_a_real_server_that_starts_answering_late(caplog):
    """The real driver against a port that refuses until the second wait, then is the real
    PostgreSQL: the wait returns, having logged each refusal."""
    real = make_url(PG_URL)
    proxy = LateProxy(real.host or "127.0.0.1", real.port or 5432)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 2:
            await proxy.open()
        await asyncio.sleep(0)

    url = real.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    try:
        with caplog.at_level(logging.INFO, logger="tapebot.db"):
            attempts = await wait_for_database(url, sleep=sleep)
    finally:
        await proxy.close()
    assert attempts == 3 and proxy.connections == 1
    lines = [r.getMessage() for r in caplog.records]
    assert sum("not reachable yet" in line for line in lines) == 2
    assert any("answered after 3 attempts" in line for line in lines)


@needs_pg
async def test_a_missing_database_fails_at_once():
    url = make_url(PG_URL).set(database="tapebot_no_such_db").render_as_string(hide_password=False)

    async def no_sleep(_s: float) -> None:
        raise AssertionError("a missing database is not waited for")

    with pytest.raises(StorageError, match="does not exist"):
        await wait_for_database(url, sleep=no_sleep)
