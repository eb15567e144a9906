"""The store's hot statements: SQLAlchemy Core built once per dialect (`HotStatements`), run by the
stores in `memory.stores` as one synchronous function per transaction (`Database.run`)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

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
