"""Migration 0012_chat_tables and the typed tables it creates: a database at 0011 holding kv rows in
the shapes the bot wrote ("chat:", "paired:", "card:", "question:", "progress:", "partial:") is
upgraded, and every row arrives typed; downgrade puts them back. On SQLite files, and on
PostgreSQL when TAPEBOT_TEST_POSTGRES_URL is set (CI)."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.ports import ApprovalRecord
from memory.chat_tables import ChatRecord, PausedProgress, SentRef
from memory.db import Database, upgrade
from memory.stores import SqlStore

BEFORE = "0011_recall_indexes"


def approval(approval_id: str, chat_key: str) -> ApprovalRecord:
    now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    return ApprovalRecord(
        id=approval_id,
        session_id="s1",
        turn_id="t1",
        call_id="c1",
        tool="place_order",
        arguments={"code": "600519"},
        args_hash="h",
        requester="42",
        approvers=["42"],
        chat_key=chat_key,
        status="pending",
        created_at=now,
        expires_at=now + timedelta(hours=1),
    )


# The kv rows as bot/chats.py and bot/gateway.py wrote them before 0012.
OLD_ROWS: dict[str, Any] = {
    "chat:telegram:42": {
        "session_id": "telegram:42#ab12cd34",
        "lang": "zh",
        "model": "deepseek-chat",
        "owner": "42",
        "chat": {"platform": "telegram", "chat_id": "42", "thread_id": None, "is_group": False},
    },
    "chat:discord:300:thread555:user7": {
        "session_id": "discord:300:thread555:user7#00ff00ff",
        "lang": "en",
        "model": None,
        "owner": "",
        "chat": {"platform": "discord", "chat_id": "300", "thread_id": "555", "is_group": True},
    },
    # written before chats kept their address
    "chat:telegram:7": {"session_id": "telegram:7#11111111", "lang": "en", "model": None},
    "paired:telegram": ["42", "9"],
    "paired:discord": ["1001"],
    "card:ap1": {"platform": "telegram", "chat_id": "42", "thread_id": None, "is_group": False,
                 "message_id": "501", "lang": "zh"},
    "question:turn9": {"platform": "discord", "chat_id": "300", "thread_id": "555", "is_group": True,
                       "message_id": "777", "lang": "en", "text": "Which phase filter?"},
    "progress:telegram:42": {"platform": "telegram", "chat_id": "42", "thread_id": None, "is_group": False,
                             "message_id": "610", "lang": "zh",
                             "lines": {"c1": "✅ analyze_stock", "c2": "⏳ backtest"},
                             "names": {"c1": "analyze_stock", "c2": "backtest"}, "cut": ["c2"]},
    "partial:telegram:42": {"platform": "telegram", "chat_id": "42", "thread_id": None, "is_group": False,
                            "message_id": "620", "lang": "zh", "ids": ["620", "621"]},
    "progress:telegram:9": None,  # used up: set to None, never deleted
    "offset": {"telegram": 5},  # genuinely key-value: stays
    "discord.commands_hash:1:global": "digest",
}  # fmt: skip


async def _at(database_url: str, revision: str) -> None:
    await upgrade(database_url, revision)


async def _downgrade(database_url: str, revision: str) -> None:
    from memory.db import downgrade

    await downgrade(database_url, revision)


async def _old_database(database_url: str) -> None:
    await _at(database_url, BEFORE)
    async with Database(database_url, migrate=False) as db:
        store = SqlStore(db)
        await store.create_approval(approval("ap1", "telegram:42"))
        for key, value in OLD_ROWS.items():
            await store.kv_set(key, value)


async def test_upgrade_moves_every_kv_row_into_its_typed_table(database_url):
    await _old_database(database_url)
    await upgrade(database_url)
    async with Database(database_url, migrate=False) as db:
        store = SqlStore(db)
        dm = await store.load_chat("telegram:42")
        assert dm is not None and dm.updated_at is not None
        assert dm == ChatRecord(
            "telegram:42", "telegram", "42", None, False, "telegram:42#ab12cd34", "zh",
            "deepseek-chat", "42", dm.updated_at,
        )  # fmt: skip
        group = await store.load_chat("discord:300:thread555:user7")
        assert group is not None
        assert (group.platform, group.chat_id, group.thread_id, group.is_group) == (
            "discord",
            "300",
            "555",
            True,
        )
        assert (group.session_id, group.lang, group.model, group.owner) == (
            "discord:300:thread555:user7#00ff00ff", "en", None, "",
        )  # fmt: skip
        old = await store.load_chat("telegram:7")
        assert old is not None and old.chat_id == "" and old.session_id == "telegram:7#11111111"

        assert await store.paired_users("telegram") == ["42", "9"]
        assert await store.paired_users("discord") == ["1001"]

        card = await store.get_approval("ap1")
        assert card is not None and card.message_ref == "501"

        question = await store.load_sent("question", "turn9")
        assert question == SentRef(
            "question", "turn9", "discord", "300", "555", True, "777", "en", text="Which phase filter?"
        )
        progress = await store.load_sent("progress", "telegram:42")
        assert progress is not None and progress.message_id == "610" and progress.lang == "zh"
        assert progress.progress == PausedProgress(
            {"c1": "✅ analyze_stock", "c2": "⏳ backtest"}, {"c1": "analyze_stock", "c2": "backtest"}, ["c2"]
        )
        partial = await store.load_sent("partial", "telegram:42")
        assert partial is not None and partial.message_ids == ("620", "621")
        assert await store.load_sent("progress", "telegram:9") is None

        # moved rows are gone from kv; what is genuinely key-value stays
        for key in OLD_ROWS:
            if key in ("offset", "discord.commands_hash:1:global"):
                assert await store.kv_get(key) == OLD_ROWS[key]
            else:
                assert await store.kv_get(key, "gone") == "gone", key


async def test_a_row_in_an_unknown_shape_stays_in_kv(database_url):
    await _at(database_url, BEFORE)
    async with Database(database_url, migrate=False) as db:
        await SqlStore(db).kv_set("chat:odd", ["not", "a", "chat"])
        await SqlStore(db).kv_set("question:t1", "not a reference")
    await upgrade(database_url)
    async with Database(database_url, migrate=False) as db:
        store = SqlStore(db)
        assert await store.kv_get("chat:odd") == ["not", "a", "chat"]
        assert await store.kv_get("question:t1") == "not a reference"
        assert await store.load_chat("odd") is None


async def test_downgrade_puts_the_rows_back(database_url):
    await _old_database(database_url)
    await upgrade(database_url)
    await _downgrade(database_url, BEFORE)
    async with Database(database_url, migrate=False) as db:
        store = SqlStore(db)
        for key, value in OLD_ROWS.items():
            if value is None:
                continue  # a used-up reference is not brought back
            back = await store.kv_get(key)
            if key == "paired:telegram":
                assert sorted(back) == sorted(value)
            elif key == "chat:telegram:7":  # the same chat; its owner now said to be none
                assert back == {**value, "owner": ""}
            else:
                assert back == value, key
        card = await store.get_approval("ap1")
        assert card is not None and card.message_ref == ""


async def test_typed_methods_round_trip(database_url):
    async with Database(database_url) as db:
        store = SqlStore(db)
        chat = ChatRecord("telegram:-100:topic7", "telegram", "-100", "7", True, "s#1", "zh", None, "5")
        await store.save_chat(chat)
        await store.save_chat(ChatRecord(**{**_fields(chat), "model": "m2", "lang": "en"}))
        got = await store.load_chat(chat.key)
        assert got is not None and (got.model, got.lang, got.thread_id, got.is_group) == (
            "m2",
            "en",
            "7",
            True,
        )
        assert await store.load_chat("nope") is None

        await store.add_paired_user("telegram", "5")
        await store.add_paired_user("telegram", "5")  # once only
        await store.add_paired_user("telegram", "3")
        assert await store.paired_users("telegram") == ["3", "5"]
        assert await store.paired_users("discord") == []

        ref = SentRef("partial", chat.key, "telegram", "-100", "7", True, "9", "zh", message_ids=("9", "10"))
        await store.save_sent(ref)
        assert await store.load_sent("partial", chat.key) == ref
        moved = SentRef("partial", chat.key, "telegram", "-100", "7", True, "11", "zh", message_ids=("11",))
        await store.save_sent(moved)  # replaces
        assert await store.load_sent("partial", chat.key) == moved
        assert await store.forget_sent("partial", chat.key)
        assert not await store.forget_sent("partial", chat.key)
        assert await store.load_sent("partial", chat.key) is None

        await store.create_approval(approval("ap2", chat.key))
        assert await store.set_card_message("ap2", "123")
        assert not await store.set_card_message("missing", "1")
        record = await store.get_approval("ap2")
        assert record is not None and record.message_ref == "123"


def _fields(chat: ChatRecord) -> dict[str, Any]:
    return {f: getattr(chat, f) for f in ChatRecord.__slots__}  # type: ignore[attr-defined]


# ---- the migration reads whatever a kv row holds: a row in another shape is skipped, never an error
@functools.cache
def _migration() -> Any:
    import importlib.util
    from pathlib import Path

    import memory

    path = Path(memory.__file__).parent / "migrations" / "versions" / "0012_chat_tables.py"
    spec = importlib.util.spec_from_file_location("migration_0012", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
# the shapes the bot wrote, with any of their fields replaced by anything
shaped = st.fixed_dictionaries(
    {},
    optional={
        "session_id": json_values, "lang": json_values, "model": json_values, "owner": json_values,
        "chat": json_values | st.fixed_dictionaries({}, optional={
            "platform": json_values, "chat_id": json_values, "thread_id": json_values, "is_group": json_values,
        }),
        "platform": json_values, "chat_id": json_values, "thread_id": json_values, "is_group": json_values,
        "message_id": json_values, "text": json_values, "ids": json_values,
        "lines": json_values, "names": json_values, "cut": json_values,
    },
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(value=json_values | shaped, kind=st.sampled_from(["question", "progress", "partial"]))
def test_the_migration_reads_any_stored_value_without_failing(value, kind):
    m = _migration()
    at = datetime(2026, 3, 1, tzinfo=UTC)
    chat = m._chat_row("telegram:1", value, at)
    if chat is not None:
        assert all(isinstance(chat[k], str) for k in ("platform", "chat_id", "session_id", "lang", "owner"))
        assert chat["session_id"] and isinstance(chat["is_group"], bool)
    sent = m._sent_row(kind, "r1", value, at)
    if sent is not None:
        assert all(isinstance(sent[k], str) for k in ("platform", "chat_id", "message_id", "lang", "text"))
        assert all(isinstance(i, str) for i in sent["message_ids"])
        # what the bot later makes of the stored progress
        PausedProgress.from_json(sent["progress"])
    PausedProgress.from_json(value)
