"""A new chat's row is written once, with its owner (it was written twice, the second
time only to set the owner); a button tap never makes its presser the owner."""

from __future__ import annotations

import asyncio
import sqlite3

from agent.providers.scripted import reply
from tests.bot.conftest import ALICE


def count_chat_writes(home) -> None:
    """Real SQLite triggers record every insert or update of `chats` from any connection."""
    con = sqlite3.connect(home / "tapebot.db")
    con.executescript(
        """
        CREATE TABLE chat_writes (key TEXT, owner TEXT);
        CREATE TRIGGER chat_insert AFTER INSERT ON chats
            BEGIN INSERT INTO chat_writes VALUES (NEW.key, NEW.owner); END;
        CREATE TRIGGER chat_update AFTER UPDATE ON chats
            BEGIN INSERT INTO chat_writes VALUES (NEW.key, NEW.owner); END;
        """
    )
    con.close()


def chat_writes(home) -> list[tuple[str, str]]:
    con = sqlite3.connect(home / "tapebot.db")
    try:
        return con.execute("SELECT key, owner FROM chat_writes").fetchall()
    finally:
        con.close()


async def test_a_new_chats_row_is_written_once_with_its_owner(harness):
    harness.script.add(reply("Hello."), reply("Again."))
    await harness.start()
    # in a thread: a blocking write on the event loop would wait on a write the bot has in flight
    await asyncio.to_thread(count_chat_writes, harness.home)
    api = harness.api
    api.push_text(ALICE, "hi", user_id=ALICE)
    await api.wait_for(lambda: "Hello." in api.texts(ALICE))
    assert chat_writes(harness.home) == [(f"telegram:{ALICE}", str(ALICE))]
    api.push_text(ALICE, "and again", user_id=ALICE)  # a known chat, same owner: no write
    await api.wait_for(lambda: "Again." in api.texts(ALICE))
    assert len(chat_writes(harness.home)) == 1
