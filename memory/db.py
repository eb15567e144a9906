"""The database: engine creation, Alembic migrations, and the `Database` that owns both.

SQLite (the embedded default) gets WAL, a busy timeout, foreign keys and synchronous=NORMAL on every
connection. Write transactions start with `BEGIN IMMEDIATE`: a deferred transaction that reads and
then writes can fail at once with "database is locked" when another connection wrote in between
(the busy handler is not consulted for that upgrade), whereas IMMEDIATE takes the write lock up front
and waits politely for the busy timeout. `Database.read()` gives a deferred, read-only-style session
for queries that should not queue behind writers. PostgreSQL needs none of this and gets none.

Every query is SQLAlchemy (Core or ORM), written once for both databases. Sessions run on the async
engine (aiosqlite on SQLite, asyncpg on PostgreSQL). `Database.run()` runs a whole short transaction
as one synchronous Core function — the store's hot path: on a SQLite file it runs on a synchronous
pysqlite engine right on the event-loop thread, since a local statement takes microseconds and
aiosqlite's thread hand-offs around each one cost several times more (bench/storage_path.py). It
never waits for a lock there: its connections have no busy timeout, and a transaction that finds
the write lock taken (another process) runs again in a worker thread that waits the full timeout.

A database that stays locked beyond the busy timeout surfaces as `StorageError`, never as a raw
driver exception.
"""

from __future__ import annotations

import ast
import asyncio
import json
import logging
import os
import re
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import orjson
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from agent.errors import StorageError
from config.filemodes import create_private_file, make_private_dir

log = logging.getLogger(__name__)
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
DEFAULT_BUSY_TIMEOUT_MS = 5000
_DEFERRED = "tapebot_deferred"  # execution option: begin a deferred (read) transaction on SQLite
T = TypeVar("T")


def rowcount(result: Any) -> int:
    """Rows matched by an UPDATE/DELETE (typed access to CursorResult.rowcount)."""
    return int(getattr(result, "rowcount", 0) or 0)


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def sqlite_path(url: str) -> Path | None:
    """The file behind a SQLite URL, or None for in-memory / non-SQLite URLs."""
    u = make_url(url)
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    return Path(u.database)


def create_engine(url: str, *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS, **kwargs: Any) -> AsyncEngine:
    """An async engine. For SQLite (aiosqlite): the connection pragmas above and IMMEDIATE write
    transactions; the database file's folder is created if missing."""
    if not is_sqlite(url):
        return create_async_engine(url, pool_pre_ping=True, **kwargs)

    path = sqlite_path(url)
    if path is not None:
        try:
            make_private_dir(path.parent)
            # 0600 whatever the umask; SQLite gives -wal/-shm the database file's mode.
            create_private_file(path)
        except OSError as exc:
            raise StorageError(
                f"cannot create the database folder {path.parent}: {exc.strerror or exc} "
                "— check database_url / TAPEBOT_HOME"
            ) from None
    connect_args = dict(kwargs.pop("connect_args", {}))
    connect_args.setdefault("timeout", busy_timeout_ms / 1000)
    kwargs.setdefault("json_serializer", json_dumps)
    kwargs.setdefault("json_deserializer", json_loads)
    engine = create_async_engine(url, connect_args=connect_args, **kwargs)
    _configure_sqlite(engine.sync_engine, _pragmas(busy_timeout_ms, wal=path is not None))
    return engine


def _sync_sqlite_engine(url: str, *, busy_timeout_ms: int) -> Engine:
    """A synchronous pysqlite engine on the same file, configured like the async one (`Database.run`)."""
    sync_url = make_url(url).set(drivername="sqlite")
    engine = create_sync_engine(
        sync_url,
        connect_args={"timeout": busy_timeout_ms / 1000, "check_same_thread": False},
        json_serializer=json_dumps,
        json_deserializer=json_loads,
    )
    _configure_sqlite(engine, _pragmas(busy_timeout_ms, wal=True))
    return engine


def _configure_sqlite(engine: Engine, pragmas: Callable[[Any], None]) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take BEGIN out of the driver's hands so we can choose IMMEDIATE vs DEFERRED ourselves.
        dbapi_conn.isolation_level = None
        pragmas(dbapi_conn)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        sql = "BEGIN" if conn.get_execution_options().get(_DEFERRED, False) else "BEGIN IMMEDIATE"
        # straight to the driver: a full `exec_driver_sql` costs a tenth of a short transaction
        cursor = conn.connection.dbapi_connection.cursor()
        try:
            cursor.execute(sql)
        except Exception as exc:
            raise DBAPIError.instance(sql, None, exc, conn.dialect.loaded_dbapi.Error) from exc
        finally:
            cursor.close()


def json_dumps(value: Any) -> str:
    """JSON columns on SQLite (every message and turn record): orjson, several times faster than
    the standard library; the standard library for what orjson refuses (integers beyond 64 bits,
    keys that are not strings)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)


def json_loads(text: str | bytes) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # NaN / Infinity literals, which the standard library writes
        return json.loads(text)


def _pragmas(busy_timeout_ms: int, *, wal: bool) -> Callable[[Any], None]:
    def pragmas(dbapi_conn: Any) -> None:
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            if wal:
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=NORMAL")
        finally:
            cur.close()

    return pragmas


# ---- migrations --------------------------------------------------------------------------------
def alembic_config(url: str) -> Any:
    """An Alembic `Config` pointing at the packaged migrations (no alembic.ini needed)."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def check_migration_chain(cfg: Any) -> str:
    """The single head of the packaged migrations; StorageError if the chain is broken or forked
    (revisions are one linear chain: 0001_core <- 0002_memory <- 0003_markets <- ...)."""
    import warnings

    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(cfg)
    versions = Path(script.dir) / "versions"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            heads = script.get_heads()
    except KeyError as exc:
        raise StorageError(
            f"the migration chain in {versions} is broken: a revision names "
            f"{exc.args[0]!r} as its parent but no file defines it"
        ) from None
    if len(heads) != 1:
        raise StorageError(
            f"the migrations in {versions} have {len(heads)} heads ({', '.join(sorted(heads))}); "
            "they must form one linear chain"
        )
    return heads[0]


# `revision = "0006_x"` / `down_revision: str | None = "0005_y"` at the start of a line, as Alembic writes them
_REVISION_LINE = re.compile(r"^(revision|down_revision)\s*(?::[^=\n]*)?=\s*(.+?)\s*$", re.MULTILINE)


def packaged_heads(versions: Path | None = None) -> set[str] | None:
    """The head revisions of the migration files, read with a regex so that opening a current
    database never imports Alembic (≈0.25 s). None when a file does not state its revisions as
    plain literals: then Alembic decides, as it always does for an upgrade."""
    folder = versions or MIGRATIONS_DIR / "versions"
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in folder.glob("*.py"):
        found: dict[str, str] = {
            m.group(1): m.group(2) for m in _REVISION_LINE.finditer(path.read_text(encoding="utf-8"))
        }
        try:
            rev = ast.literal_eval(found["revision"])
            down = ast.literal_eval(found.get("down_revision", "None"))
        except (KeyError, ValueError, SyntaxError):
            return None
        downs = down if isinstance(down, tuple | list) else (down,)
        if not isinstance(rev, str) or not all(d is None or isinstance(d, str) for d in downs):
            return None
        revisions.add(rev)
        parents.update(d for d in downs if d)
    return revisions - parents


def sqlite_is_current(url: str) -> bool:
    """True when the SQLite file at `url` is already at the single packaged head: read with plain
    sqlite3 (read-only), so a start that has nothing to migrate imports no Alembic."""
    path = sqlite_path(url)
    if path is None or not path.is_file():
        return False
    heads = packaged_heads()
    if heads is None or len(heads) != 1:
        return False  # Alembic reports a broken or forked chain clearly
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return False
    return {r[0] for r in rows} == heads


def _upgrade_sync(connection: Any, url: str, revision: str, down: bool = False) -> None:
    from alembic import command

    cfg = alembic_config(url)
    check_migration_chain(cfg)
    cfg.attributes["connection"] = connection  # env.py runs on this connection
    sqlite = connection.dialect.name == "sqlite"
    if sqlite:
        # SQLite changes a column by copying its table and dropping the old one, and dropping a
        # table with foreign keys on deletes what refers to it (a session's messages). Off for
        # the migrations (only outside a transaction), and checked before they commit.
        _driver_sql(connection, "PRAGMA foreign_keys=OFF")
    try:
        with connection.begin():
            (command.downgrade if down else command.upgrade)(cfg, revision)
            if sqlite and (broken := _driver_sql(connection, "PRAGMA foreign_key_check")):
                raise StorageError(f"the migrations broke {len(broken)} foreign key(s), e.g. {broken[0]}")
    finally:
        if sqlite:
            _driver_sql(connection, "PRAGMA foreign_keys=ON")


def _driver_sql(connection: Any, sql: str) -> list[Any]:
    """Straight to the driver: through SQLAlchemy, a statement would begin a transaction first."""
    cursor = connection.connection.dbapi_connection.cursor()
    try:
        cursor.execute(sql)
        return list(cursor.fetchall())
    finally:
        cursor.close()


async def upgrade(target: str | AsyncEngine, revision: str = "head") -> str | None:
    """Apply migrations up to `revision` on a URL or an existing engine; returns the revision now
    current. Works for sqlite+aiosqlite and postgresql+asyncpg URLs alike."""
    own = isinstance(target, str)
    engine = create_engine(target) if isinstance(target, str) else target
    url = engine.url.render_as_string(hide_password=False)
    try:
        before = await current_revision(engine)
        async with engine.connect() as conn:
            await conn.run_sync(_upgrade_sync, url, revision)
        after = await current_revision(engine)
        if after != before:  # alembic's own INFO lines are kept quiet (bot/logs.py): say it once
            log.info("database migrated from %s to %s", before or "an empty database", after)
        return after
    except SQLAlchemyError as exc:
        raise storage_error(exc, url) from exc
    finally:
        if own:
            await engine.dispose()


async def downgrade(target: str | AsyncEngine, revision: str) -> None:
    """Take the database back to `revision` (tests and a manual way back), with the same care as
    `upgrade`: on SQLite foreign keys are off while tables are copied."""
    own = isinstance(target, str)
    engine = create_engine(target) if isinstance(target, str) else target
    url = engine.url.render_as_string(hide_password=False)
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_upgrade_sync, url, revision, True)
    except SQLAlchemyError as exc:
        raise storage_error(exc, url) from exc
    finally:
        if own:
            await engine.dispose()


async def current_revision(engine: AsyncEngine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    def _get(sync_conn: Any) -> str | None:
        return MigrationContext.configure(sync_conn).get_current_revision()

    async with engine.execution_options(**{_DEFERRED: True}).connect() as conn:
        return await conn.run_sync(_get)


def migration_sql(url: str, revision: str = "head") -> str:
    """The DDL the migrations would run on `url`'s dialect (Alembic offline mode); no database needed."""
    import io

    from alembic import command

    cfg = alembic_config(url)
    buffer = io.StringIO()
    cfg.output_buffer = buffer
    command.upgrade(cfg, revision, sql=True)
    return buffer.getvalue()


# ---- backup ------------------------------------------------------------------------------------
def backup_sqlite(url: str, dest_dir: Path | None = None, *, now: datetime | None = None) -> Path:
    """Copy a SQLite database with SQLite's online backup API (consistent while the bot runs) to
    `<dest_dir>/<name>-<UTC timestamp>.db`, readable by the owner only. Default folder: `backups/`
    next to the database. Returns the new file."""
    path = sqlite_path(url)
    if path is None:
        raise StorageError(
            "`tapebot db backup` copies SQLite databases; for PostgreSQL use pg_dump "
            "(e.g. `pg_dump -Fc -f tapebot.dump <database>`)"
        )
    if not path.exists():
        raise StorageError(
            f"no database at {path} yet — nothing to back up (check TAPEBOT_HOME / database_url)"
        )
    folder = dest_dir if dest_dir is not None else path.parent / "backups"
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        dest, n = folder / f"{path.stem}-{stamp}.db", 1
        while True:
            try:  # created 0600 before any byte is written; never overwrites an earlier backup
                os.close(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                break
            except FileExistsError:
                n += 1
                dest = folder / f"{path.stem}-{stamp}-{n}.db"
    except OSError as exc:
        raise StorageError(f"cannot write a backup in {folder}: {exc.strerror or exc}") from None
    try:
        src = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            dst = sqlite3.connect(dest)
            try:
                src.backup(dst)
            finally:
                dst.close()
        finally:
            src.close()
    except sqlite3.Error as exc:
        dest.unlink(missing_ok=True)
        raise storage_error(exc, url) from None
    return dest


# ---- errors ------------------------------------------------------------------------------------
def storage_error(exc: BaseException, url: str = "") -> StorageError:
    """Translate a driver/SQLAlchemy error into one clear StorageError."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    detail = text.splitlines()[0] if text else type(exc).__name__
    where = ""
    if url:
        path = sqlite_path(url)
        where = f" ({path})" if path else ""
    low = detail.lower()
    if "database is locked" in low or "database table is locked" in low or "busy" in low:
        return StorageError(
            f"the database is locked{where}: another process held its write lock beyond the busy timeout "
            "— is a second tapebot running on the same database? Retry, or stop the other process"
        )
    if isinstance(exc, DBAPIError) and "unable to open database" in low:
        return StorageError(f"cannot open the database{where}: {detail} — check the path and its permissions")
    return StorageError(f"database error{where}: {detail}")


# ---- Database ----------------------------------------------------------------------------------
class Database:
    """Owns the engine and the session factories. `start()` creates the engine and applies the
    migrations; `close()` disposes of the pool. Use as `async with Database(url) as db:` or call
    start/close yourself (the composition root does)."""

    def __init__(
        self,
        url: str,
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        migrate: bool = True,
        echo: bool = False,
    ):
        self.url = url
        self.busy_timeout_ms = busy_timeout_ms
        self.migrate = migrate
        self.echo = echo
        self._sqlite = is_sqlite(url)
        self._engine: AsyncEngine | None = None
        # `run()` on a SQLite file: on the loop thread, never waiting for a lock (`_local`), and
        # in a worker thread when it must (`_waiting`)
        self._local: Engine | None = None
        self._waiting: Engine | None = None
        # The write sessions' factory exists from here on, unbound: the parts built before the
        # database opens keep it, and `start` binds it to the engine (`close` unbinds it).
        self._writer: async_sessionmaker[AsyncSession] = async_sessionmaker(expire_on_commit=False)
        self._reader: async_sessionmaker[AsyncSession] | None = None
        # SQLite has one writer. Queueing our own writers here (instead of letting connections
        # collide on the file lock) avoids SQLite's busy handler, which *sleeps* with backoff;
        # busy_timeout still covers other processes.
        self._write_lock: asyncio.Lock | None = None
        # PostgreSQL: a connection of its own for `run(..., urgent=True)` (a single statement that
        # must not queue behind a burst of transactions in the shared pool)
        self._urgent: AsyncEngine | None = None

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            raise StorageError("the database is not started (call Database.start() first)")
        return self._engine

    @property
    def sessionmaker(self) -> async_sessionmaker[AsyncSession]:
        """Sessions whose transactions take the write lock up front on SQLite (safe read-modify-write)."""
        if self._engine is None:
            raise StorageError("the database is not started (call Database.start() first)")
        return self._writer

    @property
    def sessions(self) -> async_sessionmaker[AsyncSession]:
        """The same factory as `sessionmaker`, to keep before the database is started: one object
        for the database's lifetime, bound to the engine while it is open (a session used before
        `start` or after `close` has no connection to run on)."""
        return self._writer

    @property
    def is_sqlite(self) -> bool:
        return self._sqlite

    def dialect_insert(self, table: Any) -> Any:
        """The dialect's INSERT construct for `table` (it has on_conflict_do_nothing / do_update).
        Only the dialect in use is imported: PostgreSQL's costs a SQLite process ~20 ms at start."""
        if self._sqlite:
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            return sqlite_insert(table)
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)

    async def start(self) -> None:
        if self._engine is not None:
            return
        engine = create_engine(self.url, busy_timeout_ms=self.busy_timeout_ms, echo=self.echo)
        try:
            if self.migrate and not (self._sqlite and sqlite_is_current(self.url)):
                await upgrade(engine)
        except BaseException:
            await engine.dispose()
            raise
        self._engine = engine
        if not self._sqlite:
            self._urgent = create_engine(self.url, pool_size=1, max_overflow=2).execution_options(
                isolation_level="AUTOCOMMIT"
            )
        self._writer.configure(bind=engine)
        self._reader = async_sessionmaker(
            engine.execution_options(**{_DEFERRED: True}), expire_on_commit=False
        )
        if sqlite_path(self.url) is not None:
            self._local = _sync_sqlite_engine(self.url, busy_timeout_ms=0)
            self._waiting = _sync_sqlite_engine(self.url, busy_timeout_ms=self.busy_timeout_ms)

    def count_statements(self) -> Callable[[], int]:
        """Start counting the SQL statements sent to the database (each row of an executemany is
        one; BEGIN is not counted); returns a function that reads the count. For benches: it costs
        a Python call per statement."""
        count = [0]

        def seen(_conn: object, _cursor: object, _sql: object, params: object, *_args: object) -> None:
            count[0] += (
                len(params)
                if isinstance(params, list | tuple) and params and isinstance(params[0], list | tuple | dict)
                else 1
            )

        for engine in (self.engine.sync_engine, self._local, self._waiting):
            if engine is not None:
                event.listen(engine, "before_cursor_execute", seen)
        return lambda: count[0]

    async def close(self) -> None:
        engine, self._engine, self._reader = self._engine, None, None
        self._writer.configure(bind=None)
        urgent, self._urgent = self._urgent, None
        if urgent is not None:
            await asyncio.shield(urgent.dispose())
        local, waiting, self._local, self._waiting = self._local, self._waiting, None, None
        for sync in (local, waiting):
            if sync is not None:
                sync.dispose()
        if engine is not None:
            await asyncio.shield(engine.dispose())

    async def __aenter__(self) -> Database:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """One write transaction: committed on success, rolled back on error; driver errors become
        StorageError."""
        maker = self.sessionmaker
        if not self.is_sqlite:
            async with self._transaction(maker) as s:
                yield s
            return
        async with self._lock(), self._transaction(maker) as s:
            yield s

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        """One read transaction (deferred on SQLite, so it never waits for the write lock)."""
        if self._reader is None:
            raise StorageError("the database is not started (call Database.start() first)")
        async with self._transaction(self._reader) as s:
            yield s

    def _lock(self) -> asyncio.Lock:
        if self._write_lock is None:
            self._write_lock = asyncio.Lock()
        return self._write_lock

    @asynccontextmanager
    async def _transaction(self, maker: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
        try:
            async with maker() as s, s.begin():
                yield s
        except StorageError:
            raise
        except SQLAlchemyError as exc:
            raise storage_error(exc, self.url) from exc

    async def run(self, fn: Callable[[Connection], T], *, write: bool = False, urgent: bool = False) -> T:
        """`fn(connection)` in one transaction — a write transaction (IMMEDIATE, queued behind our
        other writers) if `write`, else a deferred read — committed when `fn` returns, rolled back
        if it raises; driver errors become StorageError. `fn` is synchronous SQLAlchemy Core: the
        whole transaction is one call instead of an await per statement, several times cheaper
        than `session()`/`read()` for the store's short, hot operations. `urgent`: one statement
        that is its own transaction, on PostgreSQL over a connection of its own."""
        if self._engine is None:
            raise StorageError("the database is not started (call Database.start() first)")
        try:
            if urgent and self._urgent is not None:
                async with self._urgent.connect() as conn:
                    return await conn.run_sync(fn)
            if self._local is None:  # PostgreSQL, in-memory SQLite: the async engine
                if not write or not self._sqlite:
                    async with self._begin(write) as conn:
                        return await conn.run_sync(fn)
                async with self._lock(), self._begin(write) as conn:
                    return await conn.run_sync(fn)
            if not write:
                return await self._run_local(fn, write=False)
            async with self._lock():
                return await self._run_local(fn, write=True)
        except StorageError:
            raise
        except SQLAlchemyError as exc:
            raise storage_error(exc, self.url) from exc

    def _begin(self, write: bool) -> AbstractAsyncContextManager[AsyncConnection]:
        engine = self.engine if write else self.engine.execution_options(**{_DEFERRED: True})
        return engine.begin()

    async def _run_local(self, fn: Callable[[Connection], T], *, write: bool) -> T:
        assert self._local is not None and self._waiting is not None

        def transaction(engine: Engine) -> T:
            if not write:
                engine = engine.execution_options(**{_DEFERRED: True})
            with engine.begin() as conn:
                return fn(conn)

        try:
            return transaction(self._local)
        except OperationalError as exc:
            if not _is_busy(exc):
                raise
        # Another process holds the lock: nothing was written (a busy transaction is rolled
        # back); wait for it off the loop, as SQLite's busy handler would.
        return await asyncio.to_thread(transaction, self._waiting)


def _is_busy(exc: DBAPIError) -> bool:
    code = getattr(exc.orig, "sqlite_errorcode", None)
    if code is not None:
        return int(code) & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc.orig).lower()
