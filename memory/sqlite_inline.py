"""An aiosqlite look-alike that runs SQLite on the event-loop thread, for SQLAlchemy's async engine.

Why: aiosqlite gives every connection a thread and hands each call (cursor, execute, fetch, close,
commit …) to it and back — about eight thread hops per statement, each waiting for a full turn of
a busy event loop and for the GIL. With ~30 statements per chat message that, not SQLite, was the
bot's cost. A local SQLite statement takes microseconds, so we simply run it where we are; the
async API (`AsyncSession`, `AsyncEngine`) stays exactly as it was. Plug in with
`create_async_engine(url, async_creator=InlineSqlite(...).connect)`.

Never block the loop on a lock: a statement that may have to wait for SQLite's write lock (BEGIN
IMMEDIATE, a write, COMMIT outside WAL) first runs with the busy timeout at zero; if the lock is
taken — by another process, or by another of our own connections whose holder is a coroutine on
this very loop — it is retried once in a worker thread with the full busy timeout, exactly what
SQLite's busy handler would have done, while the loop keeps running (so that holder can commit).
Opening a connection (file I/O, WAL set-up) also happens in a worker thread.

`InlineRunner` goes one step further for short, hot operations: a reader and a writer connection of
its own, on which a synchronous function runs a whole transaction in plain sqlite3 — no SQLAlchemy,
no pool, no greenlet (see `Database.run(..., sqlite=...)`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

SQLITE_BUSY = 5
# SQLAlchemy drives this module through its async-adapter interface (the connection and cursor
# methods `async_creator` connections must offer), which is private and first took this shape in
# 2.1: 2.0.x fails at the first statement. pyproject.toml pins the same range.
SUPPORTED_SQLALCHEMY = ((2, 1), (2, 2))  # >= first, < second


class UnsupportedSQLAlchemy(RuntimeError):
    """The installed SQLAlchemy is outside the range this driver is written for."""


def check_sqlalchemy_version(version: str | None = None) -> None:
    """Raise `UnsupportedSQLAlchemy` with the fix when SQLAlchemy `version` (default: the installed
    one) is outside `SUPPORTED_SQLALCHEMY`, rather than failing later inside a statement."""
    if version is None:
        import sqlalchemy

        version = sqlalchemy.__version__
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit()) or "0"
        parts.append(int(digits))
    got = tuple(parts)
    (lo, hi) = SUPPORTED_SQLALCHEMY
    if not (lo <= got < hi):
        spec = f">={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}"
        raise UnsupportedSQLAlchemy(
            f"tapebot needs SQLAlchemy{spec} but {version} is installed "
            f"— run: pip install 'SQLAlchemy[asyncio]{spec}'"
        )


_READS = ("SELECT", "PRAGMA", "BEGIN", "ROLLBACK", "RELEASE")  # never wait for the write lock (in WAL)
_TAKES_LOCK = ("BEGIN IMMEDIATE", "BEGIN EXCLUSIVE")


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return int(code) & 0xFF == SQLITE_BUSY
    return "locked" in str(exc).lower()


class InlineSqlite:
    """Opens `InlineConnection`s: `connect` is the engine's `async_creator`."""

    def __init__(
        self,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        *,
        busy_timeout_ms: int,
        on_open: Callable[[sqlite3.Connection], None] | None = None,
    ):
        self.args, self.kwargs = tuple(args), dict(kwargs)
        self.busy_timeout_ms = busy_timeout_ms
        self.on_open = on_open

    def _open(self) -> InlineConnection:
        kwargs = {**self.kwargs, "check_same_thread": False, "isolation_level": None}
        kwargs.setdefault("timeout", self.busy_timeout_ms / 1000)
        conn = sqlite3.connect(*self.args, **kwargs)
        try:
            if self.on_open is not None:
                self.on_open(conn)
            journal = conn.execute("PRAGMA journal_mode").fetchone()
        except BaseException:
            conn.close()
            raise
        wal = bool(journal) and str(journal[0]).lower() == "wal"
        return InlineConnection(conn, self.busy_timeout_ms, wal=wal)

    async def connect(self) -> InlineConnection:
        return await asyncio.to_thread(self._open)


class _ImmediateQueue:
    """SQLAlchemy's aiosqlite adapter sets `isolation_level` by queueing `(future, fn)` on the
    connection's worker queue (`_tx`); here there is no worker, so run it now."""

    def put_nowait(self, item: tuple[asyncio.Future[Any], Callable[[], Any]]) -> None:
        future, fn = item
        try:
            result = fn()
        except Exception as exc:  # noqa: BLE001 — handed to the caller's future, which re-raises it
            future.set_exception(exc)
        else:
            future.set_result(result)


class InlineConnection:
    """The subset of `aiosqlite.Connection` SQLAlchemy's aiosqlite dialect uses."""

    def __init__(self, conn: sqlite3.Connection, busy_timeout_ms: int, *, wal: bool):
        self._conn = conn
        self._connection: sqlite3.Connection | None = conn  # SQLAlchemy checks it is truthy
        self._tx = _ImmediateQueue()
        self.busy_timeout_ms = busy_timeout_ms
        self.wal = wal
        self._writing = False  # this transaction holds the write lock (took it, or wrote)

    @property
    def isolation_level(self) -> str | None:
        return self._conn.isolation_level

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    def cursor(self) -> InlineCursor:
        return InlineCursor(self, self._conn.cursor())

    async def commit(self) -> None:
        if self.wal:  # a WAL commit never waits for a lock
            self._conn.commit()
        else:
            await self.run(self._conn.commit, may_wait=True)
        self._writing = False

    async def rollback(self) -> None:
        self._conn.rollback()
        self._writing = False

    async def close(self) -> None:
        if self._connection is not None:
            self._connection = None
            self._conn.close()

    def stop(self) -> None:
        """Forced close (SQLAlchemy's terminate)."""
        if self._connection is not None:
            self._connection = None
            with contextlib.suppress(Exception):
                self._conn.close()

    async def create_function(self, *args: Any, **kwargs: Any) -> None:
        self._conn.create_function(*args, **kwargs)

    async def begin(self, *, immediate: bool) -> None:
        """Start a transaction; IMMEDIATE (the write lock) is waited for off the loop if taken."""
        cursor = self._conn.cursor()
        try:
            if immediate:
                await self.run(cursor.execute, "BEGIN IMMEDIATE", may_wait=True)
            else:
                cursor.execute("BEGIN")  # deferred: takes no lock
        except BaseException:
            if self._conn.in_transaction:  # e.g. cancelled after the worker thread got the lock
                self._conn.rollback()
            raise
        finally:
            cursor.close()

    def may_wait(self, sql: str) -> bool:
        """Could this statement have to wait for the write lock?"""
        head = sql.lstrip()[:15].upper()
        if head.startswith("BEGIN"):
            self._writing = False
            return head.startswith(_TAKES_LOCK)
        if self.wal and self._writing and self._conn.in_transaction:
            return False  # in WAL, the holder of the write lock never waits again before COMMIT
        return not (self.wal and head.startswith(_READS))

    async def run(self, fn: Callable[..., Any], *args: Any, may_wait: bool) -> Any:
        """Run `fn(*args)` here; if SQLite's write lock is taken, wait for it in a worker thread."""
        if not may_wait:
            return fn(*args)
        conn = self._conn
        conn.execute("PRAGMA busy_timeout=0")
        try:
            result = fn(*args)
            contended = False
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise
            contended = True
        finally:
            conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
        if contended:
            # A failed lock attempt changes nothing: let SQLite's busy handler wait off the loop.
            future = asyncio.get_running_loop().run_in_executor(None, fn, *args)
            try:
                result = await asyncio.shield(future)
            except asyncio.CancelledError:
                # the connection is still busy in the thread: let it finish before anyone reuses it
                with contextlib.suppress(BaseException):
                    await future
                raise
        self._writing = conn.in_transaction
        return result


class InlineCursor:
    """The subset of `aiosqlite.Cursor` SQLAlchemy uses; rows are produced on the calling thread."""

    def __init__(self, owner: InlineConnection, cursor: sqlite3.Cursor):
        self._owner = owner
        self._cursor = cursor

    async def __aenter__(self) -> InlineCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def description(self) -> Any:
        return self._cursor.description

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return self._cursor.lastrowid

    @property
    def arraysize(self) -> int:
        return self._cursor.arraysize

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        self._cursor.arraysize = value

    async def execute(self, sql: str, parameters: Any = None) -> InlineCursor:
        args = (sql,) if parameters is None else (sql, parameters)
        await self._owner.run(self._cursor.execute, *args, may_wait=self._owner.may_wait(sql))
        return self

    async def executemany(self, sql: str, parameters: Any) -> InlineCursor:
        await self._owner.run(self._cursor.executemany, sql, parameters, may_wait=self._owner.may_wait(sql))
        return self

    async def fetchone(self) -> Any:
        return self._cursor.fetchone()

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        return self._cursor.fetchmany(self._cursor.arraysize if size is None else size)

    async def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    async def close(self) -> None:
        self._cursor.close()

    def __aiter__(self) -> InlineCursor:
        return self

    async def __anext__(self) -> Any:
        row = self._cursor.fetchone()
        if row is None:
            raise StopAsyncIteration
        return row


def _fail(batch: Sequence[tuple[Any, asyncio.Future[Any]]], exc: BaseException) -> None:
    for _, future in batch:
        if not future.done():
            if isinstance(exc, Exception):
                future.set_exception(exc)
            else:
                future.cancel()


class InlineRunner:
    """A reader and a writer connection of their own for short synchronous transactions:
    `await runner.run(fn, write=False)` runs `fn(sqlite3_connection)` between BEGIN and COMMIT
    (ROLLBACK if it raises); reads are deferred and never suspend, so one connection serves every
    coroutine. Reads run on the writer's connection while it is idle: in WAL mode a connection
    drops its whole page cache when *another* connection has committed since its last
    transaction, so a separate reader re-reads every page after each group commit.

    Writes are group-committed (`write`): every write submitted during one turn of the event loop
    runs in one transaction and the batch is committed once. Two hundred chats writing at once then
    pay for a handful of COMMITs instead of hundreds. A write whose function raises is rolled back
    alone (the batch is run again with a savepoint per write; write functions only run SQL, so
    running one twice is safe); a COMMIT that fails fails the whole batch. Each
    caller's await returns only after the COMMIT, so durability is exactly as before."""

    def __init__(self, reader: InlineConnection, writer: InlineConnection):
        self.reader, self.writer = reader, writer
        self._pending: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._writing = False  # the writer connection is in (or beginning) a write transaction
        self.batches = self.writes = 0  # observable in tests and benches

    @classmethod
    async def open(cls, opener: InlineSqlite) -> InlineRunner | None:
        """Both connections, or None unless the database is in WAL mode (where readers never wait
        and a writer waits only to begin)."""
        reader = await opener.connect()
        writer = await opener.connect()
        if reader.wal and writer.wal:
            return cls(reader, writer)
        await reader.close()
        await writer.close()
        return None

    def busy(self, *, write: bool) -> bool:
        """The connection is inside a transaction already (never expected; callers then take
        another path rather than interleave)."""
        return (self.writer if write else self.reader).in_transaction

    def read(self, fn: Callable[[sqlite3.Connection], T], *, snapshot: bool = True) -> T:
        """`fn` in one deferred read transaction, right now: in WAL a read never waits for a lock,
        so there is nothing to await (no coroutine layers per SELECT). On the writer's connection
        when it is idle (its page cache is still valid), else on the reader. Without `snapshot`,
        no BEGIN/ROLLBACK around `fn`: each of its statements is a read transaction of its own
        (for one statement, the same thing, two statements cheaper)."""
        idle = not self._writing and not self.writer.in_transaction
        db = (self.writer if idle else self.reader)._conn
        if not snapshot:
            return fn(db)
        db.execute("BEGIN")
        try:
            return fn(db)
        finally:
            db.rollback()  # a read transaction: ending it is all that is left to do

    async def run(self, fn: Callable[[sqlite3.Connection], T], *, write: bool) -> T:
        conn = self.writer if write else self.reader
        self._writing = self._writing or write
        try:
            await conn.begin(immediate=write)
            try:
                result = fn(conn._conn)
            except BaseException:
                conn._conn.rollback()
                raise
            conn._conn.commit()  # WAL: never waits for a lock
            return result
        finally:
            if write:
                self._writing = False

    async def write(self, fn: Callable[[sqlite3.Connection], T], *, lock: asyncio.Lock) -> T:
        """Run `fn` in the next group commit (under `lock`, the database's write lock)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        entry = (fn, future)
        self._pending.append(entry)
        if self._flusher is None or self._flusher.done():
            self._flusher = loop.create_task(self._flush(lock), name="sqlite-group-commit")
        try:
            return await future
        except asyncio.CancelledError:
            # Withdrawn (the await cancelled the future), whether still queued or in a batch
            # waiting for the lock: the batch runs without it. After BEGIN a batch runs to COMMIT
            # and sets its results without suspending, so a caller can only be cancelled before
            # its write started or after it was committed.
            if entry in self._pending:
                self._pending.remove(entry)
            raise

    async def _flush(self, lock: asyncio.Lock) -> None:
        while self._pending:
            async with lock:
                batch, self._pending = self._pending, []
                await self._commit(batch)

    async def _commit(
        self, batch: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]]
    ) -> None:
        self._writing = True
        try:
            await self._commit_batch(batch)
        finally:
            self._writing = False

    async def _commit_batch(
        self, batch: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]]
    ) -> None:
        conn = self.writer
        db = conn._conn
        try:
            await conn.begin(immediate=True)
        except BaseException as exc:  # the lock stayed taken beyond the busy timeout, or shutdown
            _fail(batch, exc)
            if not isinstance(exc, Exception):
                raise
            return
        batch = [entry for entry in batch if not entry[1].done()]  # callers cancelled meanwhile
        outcomes: list[tuple[asyncio.Future[Any], bool, Any]] = []
        try:
            db.execute("SAVEPOINT group_batch")
            try:  # the usual case: every write succeeds, one savepoint for all of them
                outcomes = [(future, True, fn(db)) for fn, future in batch]
            except Exception:  # noqa: BLE001 — run the batch again, each write in a savepoint of its own
                db.execute("ROLLBACK TO group_batch")
                outcomes = []
                for fn, future in batch:
                    db.execute("SAVEPOINT group_write")
                    try:
                        outcomes.append((future, True, fn(db)))
                    except Exception as exc:  # noqa: BLE001 — handed to that write's future, which re-raises it
                        db.execute("ROLLBACK TO group_write")
                        outcomes.append((future, False, exc))
                    db.execute("RELEASE group_write")
            db.execute("RELEASE group_batch")
            db.commit()  # WAL: never waits for a lock
        except BaseException as exc:
            with contextlib.suppress(Exception):
                db.rollback()
            _fail(batch, exc)
            if not isinstance(exc, Exception):
                raise
            return
        self.batches += 1
        self.writes += len(outcomes)
        for future, ok, value in outcomes:  # no await since the filter: none was cancelled
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    async def close(self) -> None:
        if self._flusher is not None and not self._flusher.done():
            with contextlib.suppress(BaseException):
                await self._flusher
        await self.reader.close()
        await self.writer.close()
