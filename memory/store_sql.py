"""What the SQL stores share: their hot statements, SQLAlchemy Core built once per dialect
(`HotStatements`) and run as one synchronous function per transaction (`Database.run`); the base
class with the database and the masking of secrets; the row builders more than one store writes
(a turn, a usage row, the records of received messages)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from functools import cached_property
from typing import Any

import sqlalchemy as sa
from pydantic import TypeAdapter
from sqlalchemy.engine import Connection

from agent.messages import Message
from agent.ports import Receipt, TurnRecord, UsageRecord
from agent.redact import redact_message
from memory.db import Database
from memory.models import KV, MESSAGES, PROCESSED_UPDATES, SESSIONS, TURNS, USAGE

OPEN_TURN_STATUSES = ("running", "suspended")

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
                "answer": turn.excluded.answer,
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


# A datetime as pydantic writes it in JSON (the turn payload's `updated_at`), without copying the
# whole record to change that one field
_JSON_TIME = TypeAdapter(datetime)


class SqlBase:
    """The database, the dialect's statements, and the masking every writer of messages and
    received-message records goes through."""

    def __init__(self, database: Database, *, redact: Callable[[str], str] | None = None):
        self.db = database
        # The last wall before the disk: messages and received-message records are written
        # with secrets masked, whoever built them. The runtime masks them first (so the model sees
        # the masked form too); this catches any other writer.
        self._redact = redact

    def _clean(self, messages: Sequence[Message]) -> list[Message]:
        if self._redact is None:
            return list(messages)
        return [redact_message(m, self._redact) for m in messages]

    @cached_property
    def _sql(self) -> HotStatements:
        return HotStatements(self.db.dialect_insert)

    def _ensure_session_sync(
        self, conn: Connection, session_id: str, chat_key: str = "", user_id: str = "", *, now: datetime
    ) -> None:
        conn.execute(
            self._sql.ensure_session,
            {
                "id": session_id,
                "chat_key": chat_key,
                "user_id": user_id,
                "title": "",
                "model": "",
                "created_at": now,
                "updated_at": now,
                "archived": False,
            },
        )


def turn_values(turn: TurnRecord, now: datetime) -> dict[str, Any]:
    # the payload carries its own write time: start-up recovery reads how old a turn is
    # (`updated_at` is the record's last field: set in the dump, it stays last)
    payload = turn.model_dump(mode="json")
    payload["updated_at"] = _JSON_TIME.dump_python(now, mode="json")
    return {
        "id": turn.id,
        "session_id": turn.session_id,
        "status": turn.status,
        "payload": payload,
        "created_at": turn.created_at,
        "updated_at": now,
        "answer": turn.answer,
    }


def usage_values(record: UsageRecord) -> dict[str, Any]:
    u = record.usage
    return {
        "session_id": record.session_id,
        "turn_id": record.turn_id,
        "model": record.model,
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cache_read_tokens": u.cache_read_tokens,
        "cache_write_tokens": u.cache_write_tokens,
        "cost": record.cost,
        "created_at": record.created_at,
    }


def receipt_params(receipts: Sequence[Receipt]) -> list[dict[str, str]]:
    return [{"r_platform": p, "r_update_id": u} for p, u in receipts]
