"""A suspended turn's waiting target is typed (WaitingTarget); turns stored while it was a plain
dict read the same. The rows are written by hand into a real SQLite file, as the old code left them."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing

from agent.ports import TurnRecord, WaitingState, WaitingTarget
from memory.db import Database
from memory.stores import SqlStore


async def test_turns_stored_with_the_old_dict_target_load_typed(tmp_path):
    path = tmp_path / "tapebot.db"
    url = f"sqlite+aiosqlite:///{path}"
    async with Database(url) as db:
        store = SqlStore(db)
        for turn_id in ("t-card", "t-question", "t-bare"):
            await store.save_turn(TurnRecord(id=turn_id, session_id="s1", status="running"))

    def old_payload(turn_id: str, target: dict) -> str:
        kind = "approval" if "approval_id" in target else "question"
        return json.dumps(
            {
                "id": turn_id,
                "session_id": "s1",
                "status": "suspended",
                "waiting": {"kind": kind, "question": "?", "confirmation_target": target},
            }
        )

    old = {
        "t-card": {"call_id": "c1", "tool": "place_order", "approval_id": "a1"},
        "t-question": {"call_id": "c2", "tool": "ask_user"},
        "t-bare": {},
    }
    with closing(sqlite3.connect(path)) as raw, raw:
        for turn_id, target in old.items():
            raw.execute(
                "UPDATE turns SET status = 'suspended', payload = ? WHERE id = ?",
                (old_payload(turn_id, target), turn_id),
            )

    async with Database(url) as db:
        store = SqlStore(db)
        card = await store.load_turn("t-card")
        question = await store.load_turn("t-question")
        bare = await store.load_turn("t-bare")
        assert {t.id for t in await store.open_turns()} == set(old)

    assert card is not None and card.waiting is not None
    assert card.waiting.confirmation_target == WaitingTarget(
        call_id="c1", tool="place_order", approval_id="a1"
    )
    assert question is not None and question.waiting is not None
    assert question.waiting.confirmation_target.approval_id == ""  # a question: no approval
    assert question.waiting.confirmation_target.tool == "ask_user"
    assert bare is not None and bare.waiting is not None
    assert bare.waiting.confirmation_target == WaitingTarget()


def test_the_typed_target_is_stored_in_the_old_shape():
    """Rows written now read back in code that still expects the keys (a rollback)."""
    waiting = WaitingState(
        kind="approval",
        question="?",
        confirmation_target=WaitingTarget(call_id="c", tool="x", approval_id="a"),
    )
    dumped = json.loads(waiting.model_dump_json())["confirmation_target"]
    assert dumped == {"call_id": "c", "tool": "x", "approval_id": "a"}
