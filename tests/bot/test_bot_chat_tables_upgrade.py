"""A database from before migration 0012 (chats, pairings and card references in `kv` rows) opened
by the new bot: the chat continues its conversation, a paired user is still admitted, and a card
sent before the upgrade still decides its approval and is edited to its final state.

The old database is made the way an upgrade from an older version meets it: the bot runs, stops,
and the file is taken back to 0011 (its rows moved back into `kv` under their old keys)."""

from __future__ import annotations

import sqlite3
from typing import Any

from agent.providers.scripted import ScriptedClient, reply
from memory.db import downgrade as downgrade_db
from tests.bot.conftest import ALICE, Harness
from tests.bot.test_bot_telegram_flow import buttons_of
from tests.fakes.telegram_api import FakeBotAPI, button_of

STRANGER = 7777  # not in the allow-list: admitted by a pairing made before the upgrade


async def downgrade(home: Any, revision: str) -> None:
    await downgrade_db(f"sqlite+aiosqlite:///{home / 'tapebot.db'}", revision)


def kv_keys(home: Any) -> set[str]:
    con = sqlite3.connect(home / "tapebot.db")
    try:
        return {r[0] for r in con.execute("SELECT key FROM kv")}
    finally:
        con.close()


async def test_a_database_from_before_the_chat_tables_keeps_chats_pairings_and_cards(tmp_path):
    api = FakeBotAPI()
    h = Harness(tmp_path / "home", api, ScriptedClient())
    h.script.add(reply(tool_calls=[("write_file", {"path": "b.txt", "content": "later"})]))
    try:
        app = await h.start()
        api.push_text(ALICE, "save b.txt", user_id=ALICE)
        card = await api.wait_for_card(ALICE)
        before = await app.store.load_chat(f"telegram:{ALICE}")
        assert before is not None
        await app.store.add_paired_user("telegram", str(STRANGER))
        await h.stop()

        await downgrade(h.home, "0011_recall_indexes")
        keys = kv_keys(h.home)
        assert {f"chat:telegram:{ALICE}", "paired:telegram"} <= keys
        assert any(k.startswith("card:") for k in keys)

        h.script = ScriptedClient([reply("Saved b.txt."), reply("Hello, paired user.")])
        app = await h.start()  # migrates to the head again
        assert not any(k.split(":")[0] in ("chat", "paired", "card") for k in kv_keys(h.home))
        after = await app.store.load_chat(f"telegram:{ALICE}")
        assert after is not None and after.session_id == before.session_id

        once = button_of(card, "o")
        api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
        await api.wait_for(lambda: any("Saved b.txt." in t for t in api.texts(ALICE)))
        assert (h.home / "workspace" / "b.txt").read_text() == "later"
        # the card found through approvals.message_ref: its buttons are gone
        await api.wait_for(lambda: not buttons_of(api.messages[(ALICE, card["message_id"])]))

        api.push_text(STRANGER, "hello", user_id=STRANGER)
        await api.wait_for(lambda: any("Hello, paired user." in t for t in api.texts(STRANGER)))
    finally:
        await h.stop()
