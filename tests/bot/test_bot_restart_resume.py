"""After a crash, interrupted turns are resumed without waiting for the user:
an action approved just before the crash runs on resume (its approval still holds) instead of
showing "you moved on" at the next message. The crash is the database as it was at that moment
(an SQLite online backup) opened by a new App, as in test_bot_received_restart."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3

from agent.providers.scripted import ScriptedClient, reply
from tests.bot.conftest import ALICE, ON_BOTH_DATABASES, Harness
from tests.fakes.telegram_api import FakeBotAPI, button_of


def crash_copy(home, crashed) -> None:
    shutil.copytree(home, crashed, ignore=shutil.ignore_patterns("tapebot.db*"))
    src, dst = sqlite3.connect(home / "tapebot.db"), sqlite3.connect(crashed / "tapebot.db")
    src.backup(dst)
    src.close()
    dst.close()


async def test_an_action_approved_just_before_a_crash_runs_after_the_restart(tmp_path):
    api = FakeBotAPI()
    h = Harness(tmp_path / "home", api, ScriptedClient())
    h.script.add(reply(tool_calls=[("write_file", {"path": "a.txt", "content": "approved"})]))
    crashed = tmp_path / "crashed"
    try:
        app = await h.start()
        api.push_text(ALICE, "save a.txt", user_id=ALICE)
        card = await api.wait_for_card(ALICE)
        once = button_of(card, "o")
        approval_id = once["callback_data"].split(":", 1)[1]
        # the decision is stored; the process dies before the turn resumes
        await app.runtime.gate.decide(approval_id, str(ALICE), "once")
        crash_copy(h.home, crashed)
    finally:
        await h.stop()
    again = Harness(crashed, api, ScriptedClient([reply("Saved a.txt.")]))
    try:
        await again.start()
        await api.wait_for(lambda: any("Saved a.txt." in t for t in api.texts(ALICE)))
        assert (crashed / "workspace" / "a.txt").read_text() == "approved"
        told = [t for t in api.texts(ALICE) if "still stands" in t]
        assert told and "write_file" in told[0]
        assert not any("moved on" in t for t in api.texts(ALICE))
        # the next message is a new turn, not a "moved on" for the approval
        again.script.add(reply("Anything else?"))
        api.push_text(ALICE, "thanks", user_id=ALICE)
        await api.wait_for(lambda: any("Anything else?" in t for t in api.texts(ALICE)))
        await asyncio.sleep(0.1)  # absence: time for a wrong "moved on" to be sent
        assert not any("moved on" in t for t in api.texts(ALICE))
    finally:
        await again.stop()


@ON_BOTH_DATABASES
async def test_a_pending_approval_still_waits_after_a_restart(tmp_path, database_env):
    """Not decided before the crash: nothing runs, nothing is said; the card still decides it."""
    api = FakeBotAPI()
    h = Harness(tmp_path / "home", api, ScriptedClient(), extra_env=database_env)
    h.script.add(reply(tool_calls=[("write_file", {"path": "b.txt", "content": "later"})]))
    try:
        await h.start()
        api.push_text(ALICE, "save b.txt", user_id=ALICE)
        card = await api.wait_for_card(ALICE)
        await h.stop()
        sent = len(api.sent(ALICE))
        h.script = ScriptedClient([reply("Saved b.txt.")])
        await h.start()
        await asyncio.sleep(0.2)  # absence: time for a wrong resume to send or call the model
        assert len(api.sent(ALICE)) == sent and h.script.requests == []
        once = button_of(card, "o")
        api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
        await api.wait_for(lambda: any("Saved b.txt." in t for t in api.texts(ALICE)))
        assert (h.home / "workspace" / "b.txt").read_text() == "later"
    finally:
        await h.stop()


class HeldClient(ScriptedClient):
    """The first model call waits for `release` (a slow provider)."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.called = asyncio.Event()
        self.release = asyncio.Event()

    async def stream(self, request):
        first = not self.called.is_set()
        self.called.set()
        if first:
            await self.release.wait()
        async for chunk in super().stream(request):
            yield chunk


async def test_a_turn_that_reaches_its_answer_within_the_grace_period_is_delivered(tmp_path):
    """SIGTERM while the model thinks; the answer arrives within the grace period: it is stored
    and delivered before the adapters stop, and nothing is left to resume."""
    api = FakeBotAPI()
    h = Harness(
        tmp_path / "home",
        api,
        HeldClient([reply("The answer, in time.")]),
        extra_env={"TAPEBOT_AGENT__SHUTDOWN_GRACE_S": "60"},
    )
    try:
        await h.start()
        api.push_text(ALICE, "question", user_id=ALICE)
        await asyncio.wait_for(h.script.called.wait(), 10)
        stopping = asyncio.create_task(h.stop())
        await asyncio.sleep(0.1)  # absence: time for a wrong early stop to finish
        assert not stopping.done()  # waiting for the turn, within the grace period
        later = api.push_text(ALICE, "arrives during the stop", user_id=ALICE)
        await api.wait_for(lambda: any("restarting" in t for t in api.texts(ALICE)))
        h.script.release.set()
        await asyncio.wait_for(stopping, 30)
        assert sum("The answer, in time." in t for t in api.texts(ALICE)) == 1
        db = sqlite3.connect(h.home / "tapebot.db")
        statuses = [r[0] for r in db.execute("SELECT status FROM turns")]
        db.close()
        assert statuses == ["completed"]
        assert api.confirmed_offset > later  # recorded, so acknowledged

        h.script = ScriptedClient([reply("Now the second one.")])
        await h.start()  # the message that came during the stop is answered; nothing is re-run
        await api.wait_for(lambda: any("Now the second one." in t for t in api.texts(ALICE)))
        users = [m.text for m in h.script.requests[0].messages if m.role == "user"]
        assert users == ["question", "arrives during the stop"]
        assert not any("restarted while working" in t for t in api.texts(ALICE))
    finally:
        await h.stop()
