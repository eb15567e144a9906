"""The store's hot statements, twice: SQLAlchemy Core built once per dialect (`HotStatements`) and
the same operations as plain SQL for SQLite (`SqliteOps`). `memory.stores.SqlStore` picks one per
call (see `Database.run`); a test compares the rows the two paths store."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from memory.models import KV, MESSAGES, PROCESSED_UPDATES, SESSIONS, TURNS, USAGE

OPEN_TURN_STATUSES = ("running", "suspended")
OPEN_TURN_SQL = (
    f"SELECT payload FROM turns WHERE session_id = ? AND status IN ({', '.join('?' * len(OPEN_TURN_STATUSES))}) "
    "ORDER BY updated_at DESC LIMIT 1"
)

PROCESSED = PROCESSED_UPDATES


class HotStatements:
    """The hot statements, built once per dialect: a statement object caches its compiled form,
    whereas building it per call costs more than running it. Values are bound at execution."""

    def __init__(self, insert: Any):
        self.ensure_session = insert(SESSIONS).on_conflict_do_nothing(index_elements=["id"])
        turn = insert(TURNS)
        self.upsert_turn = turn.on_conflict_do_update(
            index_elements=["id"],
            set_={
                "status": turn.excluded.status,
                "payload": turn.excluded.payload,
                "updated_at": turn.excluded.updated_at,
            },
        )
        self.mark_processed = insert(PROCESSED).on_conflict_do_nothing(
            index_elements=["platform", "update_id"]
        )
        self.clear_pending = (
            sa.update(PROCESSED)
            .where(
                PROCESSED.c.platform == sa.bindparam("r_platform"),
                PROCESSED.c.update_id == sa.bindparam("r_update_id"),
            )
            .values(pending=sa.null())
        )
        kv = insert(KV)
        self.kv_set = kv.on_conflict_do_update(
            index_elements=["key"], set_={"value": kv.excluded.value, "updated_at": kv.excluded.updated_at}
        )
        self.kv_get = sa.select(KV.c.value).where(KV.c.key == sa.bindparam("key"))
        self.max_seq = sa.select(sa.func.max(MESSAGES.c.seq)).where(
            MESSAGES.c.session_id == sa.bindparam("session_id")
        )
        self.insert_messages = sa.insert(MESSAGES)
        self.touch_session = (
            sa.update(SESSIONS)
            .where(SESSIONS.c.id == sa.bindparam("session_id"))
            .values(updated_at=sa.bindparam("now"))
        )
        self.insert_usage = sa.insert(USAGE)
        self.load_messages = (
            sa.select(MESSAGES.c.payload)
            .where(MESSAGES.c.session_id == sa.bindparam("session_id"))
            .order_by(MESSAGES.c.seq)
        )
        self.session_version = sa.select(SESSIONS.c.updated_at).where(
            SESSIONS.c.id == sa.bindparam("session_id")
        )
        self.load_turn = sa.select(TURNS.c.payload).where(TURNS.c.id == sa.bindparam("turn_id"))
        self.open_turn = (
            sa.select(TURNS.c.payload)
            .where(
                TURNS.c.session_id == sa.bindparam("session_id"),
                TURNS.c.status.in_(OPEN_TURN_STATUSES),
            )
            .order_by(TURNS.c.updated_at.desc())
            .limit(1)
        )


def _utc_text(value: datetime) -> str:
    """A timestamp as `UTCDateTime` stores it in SQLite: naive UTC, "YYYY-MM-DD HH:MM:SS.ffffff"
    (SQLAlchemy's format), in one C call instead of two type processors."""
    if value.tzinfo is UTC:  # `utcnow()`'s: the text is the same, less its "+00:00"
        return value.isoformat(" ", "microseconds")[:26]
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value.isoformat(" ", "microseconds")


def column_processor(column: Any, dialect: Dialect, *, result: bool = False) -> Callable[[Any], Any]:
    """How SQLAlchemy itself converts `column`'s values for `dialect` (to the database, or back
    with `result`), so plain SQL stores and reads exactly what the ORM and Core do."""
    impl = column.type.dialect_impl(dialect)
    fn = impl.result_processor(dialect, None) if result else impl.bind_processor(dialect)
    return fn or (lambda v: v)


def utc_text_processor(column: Any, dialect: Dialect) -> Callable[[Any], Any]:
    """`column`'s (a `UTCDateTime`) bind conversion: `_utc_text` when it gives what SQLAlchemy's
    own processors give, else those."""
    convert = column_processor(column, dialect)
    sample = datetime(2001, 2, 3, 4, 5, 6, 7, tzinfo=UTC)
    return _utc_text if _utc_text(sample) == convert(sample) else convert


class SqliteOps:
    """The hot operations in plain SQL for SQLite (see `Database.run(..., sqlite=...)`). Keep them in
    step with `HotStatements` and the Core code in `SqlStore` (a test compares the rows they store)."""

    def __init__(self, dialect: Dialect):
        def processor(column: sa.Column[Any], result: bool = False) -> Callable[[Any], Any]:
            return column_processor(column, dialect, result=result)

        self.time = utc_text_processor(MESSAGES.c.created_at, dialect)  # UTCDateTime everywhere
        self.json = processor(MESSAGES.c.payload)
        self.from_json = processor(MESSAGES.c.payload, result=True)
        self.kv_in, self.kv_out = processor(KV.c.value), processor(KV.c.value, result=True)
        self.false = processor(SESSIONS.c.archived)(False)

    def version_and_last_seq(self, db: sqlite3.Connection, session_id: str) -> tuple[Any, int | None]:
        """`sessions.updated_at` and the session's highest message seq, in one statement;
        (None, None) when there is no such session (and so no messages: they belong to one)."""
        row = db.execute(
            "SELECT updated_at, (SELECT max(seq) FROM messages WHERE session_id = ?1) "
            "FROM sessions WHERE id = ?1",
            (session_id,),
        ).fetchone()
        return (None, None) if row is None else (row[0], row[1])

    def session_version(self, db: sqlite3.Connection, session_id: str) -> Any:
        """`sessions.updated_at` as stored (every write of messages sets it), or None."""
        row = db.execute("SELECT updated_at FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return None if row is None else row[0]

    def ensure_session(
        self, db: sqlite3.Connection, session_id: str, chat_key: str, user_id: str, t: str
    ) -> bool:
        """`t`: the time as stored (`self.time(now)`), converted once per transaction. True if the
        session was created (its version is `t`), False if it existed."""
        return (
            db.execute(
                "INSERT INTO sessions (id, chat_key, user_id, title, model, created_at, updated_at, archived) "
                "VALUES (?, ?, ?, '', '', ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (session_id, chat_key, user_id, t, t, self.false),
            ).rowcount
            == 1
        )

    def insert_rows(
        self,
        db: sqlite3.Connection,
        session_id: str,
        rows: Sequence[tuple[str, dict[str, Any]]],
        start: int,
        t: str,
        *,
        touch: bool = True,
    ) -> None:
        """Without `touch`, the session's version is left as it is (it is `t` already)."""
        if rows:
            db.executemany(
                "INSERT INTO messages (session_id, seq, role, payload, created_at) VALUES (?, ?, ?, ?, ?)",
                [(session_id, start + i, role, self.json(p), t) for i, (role, p) in enumerate(rows)],
            )
        if touch:
            db.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (t, session_id))

    def advance_session(self, db: sqlite3.Connection, session_id: str, version: Any, t: str) -> bool:
        """Set the session's version (`updated_at`) to `t` if it is still `version`, i.e. nobody
        wrote its messages since we read them: True if so. One statement where reading the
        version and then setting it were two."""
        return (
            db.execute(
                "UPDATE sessions SET updated_at = ? WHERE id = ? AND updated_at = ?", (t, session_id, version)
            ).rowcount
            == 1
        )

    def append_rows(
        self, db: sqlite3.Connection, session_id: str, rows: Sequence[tuple[str, dict[str, Any]]], t: str
    ) -> None:
        """The rows after the session's last message: each one's seq is the highest + 1, looked up
        through the unique (session_id, seq) index by the INSERT itself."""
        db.executemany(
            "INSERT INTO messages (session_id, seq, role, payload, created_at) "
            "SELECT ?1, coalesce(max(seq), -1) + 1, ?2, ?3, ?4 FROM messages WHERE session_id = ?1",
            [(session_id, role, self.json(p), t) for role, p in rows],
        )

    def upsert_turn(self, db: sqlite3.Connection, row: dict[str, Any], t: str) -> None:
        """`t`: `row["updated_at"]` as stored."""
        db.execute(
            "INSERT INTO turns (id, session_id, status, payload, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET status = excluded.status, "
            "payload = excluded.payload, updated_at = excluded.updated_at",
            (row["id"], row["session_id"], row["status"], self.json(row["payload"]),
             self.time(row["created_at"]), t),
        )  # fmt: skip

    def insert_usage(self, db: sqlite3.Connection, row: dict[str, Any]) -> None:
        db.execute(
            "INSERT INTO usage (session_id, turn_id, model, input_tokens, output_tokens, "
            "cache_read_tokens, cache_write_tokens, cost, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (row["session_id"], row["turn_id"], row["model"], row["input_tokens"], row["output_tokens"],
             row["cache_read_tokens"], row["cache_write_tokens"], row["cost"], self.time(row["created_at"])),
        )  # fmt: skip

    def clear_pending(self, db: sqlite3.Connection, receipts: Sequence[tuple[str, str]]) -> None:
        db.executemany(
            "UPDATE processed_updates SET pending = NULL WHERE platform = ? AND update_id = ?", receipts
        )

    def payload(self, db: sqlite3.Connection, sql: str, args: tuple[Any, ...]) -> Any:
        row = db.execute(sql, args).fetchone()
        return None if row is None else self.from_json(row[0])
