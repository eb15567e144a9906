"""An approved action runs exactly once, or the user is told it did not, through the fake
Telegram Bot API with the real paper broker. The crash is the database as it was at that moment
(an SQLite online backup, `crash_copy`) opened by a new App.

- crash after approval, before start: the order runs once after the restart, even when the
  user's next message (or a command) reaches the bot before the recovery has run.
- crash during execution: the order is looked up by its idempotency key — filled once, never
  "may or may not have completed" for an order that does not exist, never twice.
- The tap and the decision are one durable step: a decision that fails leaves its tap unrecorded,
  so the redelivered tap decides it.
- No progress line is left at ⏸.
"""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from agent.providers.scripted import ScriptedClient, reply
from tests.bot.conftest import ALICE, Harness
from tests.bot.test_bot_consent_flow import BUY, trades
from tests.bot.test_bot_restart_resume import crash_copy
from tests.fakes.telegram_api import FakeBotAPI, buttons_of

MAYBE = "may or may not"


def _card(api: FakeBotAPI):
    return next((m for m in api.sent(ALICE) if m.get("text", "").startswith("🔐") and buttons_of(m)), None)


def _once(card: dict) -> str:
    return next(b["callback_data"] for b in buttons_of(card) if b["callback_data"].startswith("o:"))


def _shown(api: FakeBotAPI) -> list[str]:
    """Every message of the chat as it shows now (edits applied)."""
    return [m.get("text", "") for (c, _), m in api.messages.items() if c == ALICE]


def _no_pause_left(api: FakeBotAPI) -> None:
    stuck = [text for text in _shown(api) if "⏸" in text]
    assert not stuck, stuck


def _processed(home, update_id: str) -> bool:
    con = sqlite3.connect(home / "tapebot.db")
    try:
        row = con.execute("SELECT 1 FROM processed_updates WHERE update_id = ?", (str(update_id),)).fetchone()
        return row is not None
    finally:
        con.close()


def _filled_once(home) -> None:
    assert [(r[0], r[1], r[2], r[3]) for r in trades(home)] == [("600519", "buy", 100, "filled")]


@pytest.mark.parametrize("next_input", ["message", "command"])
async def test_e3_an_order_approved_just_before_a_crash_fills_once_after_the_restart(tmp_path, next_input):
    """The approval is stored, the process dies before the turn resumes; after the restart the
    user's next message (or /status) is already waiting. The order fills once; nothing says the
    turn moved on or that the call was not run; no line is left at ⏸."""
    api = FakeBotAPI()
    h = Harness(tmp_path / "home", api, ScriptedClient([reply(tool_calls=[("execute_trade", BUY)])]))
    crashed = tmp_path / "crashed"
    try:
        app = await h.start()
        api.push_text(ALICE, "buy 100 moutai", user_id=ALICE)
        card = await api.wait_for(lambda: _card(api))
        await api.wait_for(lambda: any("⏸" in text for text in _shown(api)))
        await asyncio.sleep(0.2)  # the turn has suspended (its progress kept)
        await app.runtime.gate.decide(_once(card).split(":", 1)[1], str(ALICE), "once")
        crash_copy(h.home, crashed)
    finally:
        await h.stop()
    # before the new process polls, the user's next input is already waiting for it
    if next_input == "message":
        api.push_text(ALICE, "and how is my cash?", user_id=ALICE)
    else:
        api.push_text(ALICE, "/status", user_id=ALICE)
    again = Harness(crashed, api, ScriptedClient([reply("Bought 100."), reply("Cash is fine.")]))
    try:
        await again.start()
        await api.wait_for(lambda: any("Bought 100." in text for text in api.texts(ALICE)))
        await asyncio.sleep(0.3)  # absence: time for the order or the message to run twice
        if next_input == "message":  # the next message joined the resumed turn (or its own): once
            seen = [m for m in again.script.requests[-1].messages if m.role == "user" and "my cash" in m.text]
            assert len(seen) == 1
        _filled_once(crashed)
        said = " ".join(api.texts(ALICE))
        assert "moved on" not in said and "Not run" not in said and MAYBE not in said
        _no_pause_left(api)
    finally:
        await again.stop()


class _Crash:
    """execute_trade stops for the crash: before the broker writes anything, or after its fill is
    committed (the result never stored)."""

    def __init__(self, app, when: str):
        self.reached = asyncio.Event()
        spec = app.gateway.runtime.tools.get("execute_trade")
        original = spec.fn

        async def stopped(*args, **kwargs):
            if when == "after":
                await original(*args, **kwargs)
            self.reached.set()
            await asyncio.Event().wait()  # the process "dies" here

        spec.fn = stopped
        # the tool is registered once per process (a module's toolset): the next App gets it back
        self.restore = lambda: setattr(spec, "fn", original)


@pytest.mark.parametrize("when", ["before", "after"])
async def test_e2_an_order_cut_off_by_a_crash_is_looked_up_by_its_key_and_fills_once(tmp_path, when):
    """The call was marked executing when the process died — before the broker wrote the
    order, or after its fill was committed. After the restart it is looked up by its key: the
    order fills once (or its fill is found); the model gets the outcome, not "may or may not"."""
    api = FakeBotAPI()
    h = Harness(tmp_path / "home", api, ScriptedClient([reply(tool_calls=[("execute_trade", BUY)])]))
    crashed = tmp_path / "crashed"
    try:
        app = await h.start()
        crash = _Crash(app, when)
        api.push_text(ALICE, "buy 100 moutai", user_id=ALICE)
        card = await api.wait_for(lambda: _card(api))
        api.push_callback(ALICE, card["message_id"], _once(card), user_id=ALICE)
        await asyncio.wait_for(crash.reached.wait(), 10)
        crash_copy(h.home, crashed)
    finally:
        await h.stop()
        crash.restore()
    assert len(trades(crashed)) == (1 if when == "after" else 0)
    again = Harness(crashed, api, ScriptedClient([reply("Bought 100.")]))
    try:
        await again.start()
        await api.wait_for(lambda: any("Bought 100." in text for text in api.texts(ALICE)))
        _filled_once(crashed)
        result = again.script.requests[-1].messages[-1]
        assert result.role == "tool" and MAYBE not in result.tool_results[0].content
        assert '"status": "filled"' in result.tool_results[0].content
        assert any("order key" in text for text in api.texts(ALICE))  # the chat is told
        assert not any(MAYBE in text for text in api.texts(ALICE))
        await asyncio.sleep(0.2)  # absence: time for a pause line to come back
        _no_pause_left(api)
    finally:
        await again.stop()


async def test_a_tap_and_its_decision_are_one_durable_step(tmp_path):
    """The decision fails in the database (a trigger aborts the approval's update) and the process
    dies: the tap is not recorded as processed either, so Telegram's redelivery of it after the
    restart decides it — never a processed tap with the approval still pending. The same tap
    once more then changes nothing."""
    api = FakeBotAPI()
    h = Harness(tmp_path / "home", api, ScriptedClient([reply(tool_calls=[("execute_trade", BUY)])]))
    crashed = tmp_path / "crashed"
    try:
        await h.start()
        api.push_text(ALICE, "buy 100 moutai", user_id=ALICE)
        card = await api.wait_for(lambda: _card(api))

        def inject() -> None:  # in a thread: on the loop it would wait for the bot it blocks
            con = sqlite3.connect(h.home / "tapebot.db")
            con.execute(
                "CREATE TRIGGER no_decision BEFORE UPDATE ON approvals "
                "BEGIN SELECT RAISE(ABORT, 'injected: the decision is not written'); END"
            )
            con.commit()
            con.close()

        await asyncio.to_thread(inject)
        uid = api.push_callback(ALICE, card["message_id"], _once(card), user_id=ALICE)
        tap_id = "cq" + api.pushed[uid]["callback_query"]["id"]  # the adapter's id for a tap
        await api.wait_for(lambda: any("tap the" in text and "again" in text for text in api.texts(ALICE)))
        crash_copy(h.home, crashed)
    finally:
        await h.stop()
    assert not _processed(crashed, tap_id) and trades(crashed) == []
    con = sqlite3.connect(crashed / "tapebot.db")
    con.execute("DROP TRIGGER no_decision")
    con.commit()
    con.close()
    api.redeliver(uid)  # the confirming offset never reached Telegram
    again = Harness(crashed, api, ScriptedClient([reply("Bought.")]))
    try:
        await again.start()
        await api.wait_for(lambda: any("Bought." in text for text in api.texts(ALICE)), timeout=10)
        assert _processed(crashed, tap_id)
        _filled_once(crashed)
    finally:
        await again.stop()
    api.redeliver(uid)  # and once more, after another restart: nothing changes
    third = Harness(crashed, api, ScriptedClient())
    try:
        await third.start()
        await api.wait_for(lambda: all(u["update_id"] != uid for u in api.updates))
        await asyncio.sleep(0.2)  # absence: time for the redelivered update to run again
        _filled_once(crashed)
        assert third.script.requests == []
    finally:
        await third.stop()


async def test_a_card_still_pending_after_a_restart_keeps_one_progress_line_and_it_ends(tmp_path):
    """The ⏸ line of a card that is still pending after a crash is continued by the turn the
    later tap resumes (✓), not left at ⏸ beside a second progress message."""
    api = FakeBotAPI()
    h = Harness(tmp_path / "home", api, ScriptedClient([reply(tool_calls=[("execute_trade", BUY)])]))
    crashed = tmp_path / "crashed"
    try:
        await h.start()
        api.push_text(ALICE, "buy 100 moutai", user_id=ALICE)
        card = await api.wait_for(lambda: _card(api))
        await api.wait_for(lambda: any("⏸" in text for text in _shown(api)))
        await asyncio.sleep(0.1)  # the suspended turn's last writes after its pause line
        crash_copy(h.home, crashed)
    finally:
        await h.stop()
    again = Harness(crashed, api, ScriptedClient([reply("Bought 100.")]))
    try:
        await again.start()
        api.push_callback(ALICE, card["message_id"], _once(card), user_id=ALICE)
        await api.wait_for(lambda: any("Bought 100." in text for text in api.texts(ALICE)))
        await asyncio.sleep(0.2)  # absence: time for the order to run twice
        _filled_once(crashed)
        _no_pause_left(api)
        assert sum("execute_trade" in text and "✓" in text for text in _shown(api)) == 1
    finally:
        await again.stop()


class _HeldModel(ScriptedClient):
    """Every model call waits (the brief is still being written when the process "dies"), then
    fails once `release` is set: the old App ends without leaving a call hanging."""

    def __init__(self) -> None:
        super().__init__()
        self.called = asyncio.Event()
        self.release = asyncio.Event()

    async def stream(self, request):
        self.called.set()
        await self.release.wait()
        raise RuntimeError("the process died")
        yield  # pragma: no cover


async def test_an_acknowledged_brief_now_is_delivered_after_a_crash(tmp_path):
    """ "Preparing your brief now…" was said, then the process died while the brief was being
    written: after the restart the brief is written and delivered, once."""
    api = FakeBotAPI()
    env = {"TAPEBOT_SCHEDULER__ENABLED": "true"}
    h = Harness(tmp_path / "home", api, _HeldModel(), extra_env=env)
    crashed = tmp_path / "crashed"
    try:
        await h.start()
        api.push_text(ALICE, "/brief now", user_id=ALICE)
        await api.wait_for(
            lambda: any("Preparing your brief" in text for text in api.texts(ALICE)), timeout=10
        )
        await asyncio.wait_for(h.script.called.wait(), 10)
        crash_copy(h.home, crashed)
    finally:
        h.script.release.set()
        await h.stop()
    assert not any("Brief for today" in text for text in api.texts(ALICE))
    again = Harness(crashed, api, ScriptedClient([reply("Brief for today: calm.")]), extra_env=env)
    try:
        await again.start()
        await api.wait_for(lambda: any("Brief for today" in text for text in api.texts(ALICE)), timeout=20)
        await asyncio.sleep(0.3)  # absence: time for a second brief
        assert sum("Brief for today" in text for text in api.texts(ALICE)) == 1
    finally:
        await again.stop()
    # delivered: nothing is kept for a later restart
    con = sqlite3.connect(crashed / "tapebot.db")
    try:
        assert con.execute(
            "SELECT COUNT(*) FROM processed_updates WHERE platform = 'brief' AND pending IS NOT NULL"
        ).fetchone() == (0,)
    finally:
        con.close()
