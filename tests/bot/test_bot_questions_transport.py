"""Questions (ask_user) and the Telegram transport end to end: fake Bot API → adapter → gateway →
runtime (scripted model) → real SQLite. Question buttons and text answers (also across a restart),
two chats in parallel, duplicate delivery of one update, a scheduled brief hitting an
approval-requiring tool, flood control and an ambiguous card send."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest
from telegram.error import TimedOut

from agent.providers.scripted import ScriptedClient, reply
from bot.app import App
from tests.bot.conftest import ALICE, BOB, Harness
from tests.fakes.clock import FakeClock
from tests.fakes.telegram_api import FakeBotAPI, button_of, buttons_of, retry_after

GROUP = -100777
OPTIONS = ["Spring", "SOS", "LPS"]


def ask(question: str = "Which phase filter?", options: list[str] = OPTIONS) -> list:
    return reply(tool_calls=[("ask_user", {"question": question, "options": options})])


def answer_seen(req) -> dict:
    """The ask_user result the resumed turn sent to the model."""
    last = req.messages[-1]
    assert last.role == "tool" and last.tool_results[0].name == "ask_user", last
    return json.loads(last.tool_results[0].content)


def echo_answer(req) -> list:
    return reply(f"You picked {answer_seen(req)['answer']}.")


async def question_card(api: FakeBotAPI, chat: int = ALICE) -> dict:
    return await api.wait_for(
        lambda: next((m for m in api.sent(chat) if "Which phase" in m.get("text", "")), None)
    )


def approvals(home) -> list[tuple]:
    db = sqlite3.connect(home / "tapebot.db")
    try:
        return db.execute("SELECT id, tool, status, decision FROM approvals").fetchall()
    finally:
        db.close()


def has_buttons(params: dict) -> bool:
    return bool(params.get("reply_markup"))


class OptionsHarness(Harness):
    """The conftest harness with extra Telegram adapter options (an injected sleep …)."""

    def __init__(self, home, api, script, extra_env=None, **adapter_extra):
        super().__init__(home, api, script, extra_env)
        self.adapter_extra = adapter_extra

    def telegram_options(self) -> dict:
        return {**super().telegram_options(), **self.adapter_extra}


def count_runs(app: App, tool: str) -> list[dict]:
    """Record every execution of `tool` (and still run it)."""
    spec = app.gateway.runtime.tools.get(tool)
    original, runs = spec.fn, []

    def counted(*args, **kwargs):  # is_async stays as registered: wrap sync as sync, async as async
        runs.append(kwargs)
        return original(*args, **kwargs)

    spec.fn = counted
    return runs


# ---- 1. question buttons and text answers ---------------------------------------------------------


async def test_pressing_the_second_option_button_resumes_the_turn_with_that_option(harness):
    harness.script.add(ask(), echo_answer)
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "screen for me", user_id=ALICE)
    q = await question_card(api)
    assert [b["text"] for b in buttons_of(q)] == OPTIONS
    second = buttons_of(q)[1]["callback_data"]  # exactly what the bot sent
    assert len(second.encode()) <= 64
    press = api.push_callback(ALICE, q["message_id"], second, user_id=ALICE)
    await api.wait_for(lambda: "You picked SOS." in api.texts(ALICE))
    assert answer_seen(harness.script.requests[1]) == {"status": "answered", "answer": "SOS"}
    # the press was answered (no spinner left)
    cq_id = api.pushed[press]["callback_query"]["id"]
    assert any(a["callback_query_id"] == cq_id for a in api.callback_answers)
    # a second press (double tap) is answered as stale and resumes nothing
    api.push_callback(ALICE, q["message_id"], second, user_id=ALICE)
    await api.wait_for(lambda: len(api.callback_answers) == 2)
    await asyncio.sleep(0.1)  # absence: time for the stale press to resume the turn again
    assert len(harness.script.requests) == 2
    assert api.texts(ALICE).count("You picked SOS.") == 1


@pytest.mark.parametrize("answer", ["2", "the second one"])
async def test_a_text_answer_picks_the_second_option(harness, answer):
    harness.script.add(ask(), echo_answer)
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "screen for me", user_id=ALICE)
    await question_card(api)
    api.push_text(ALICE, answer, user_id=ALICE)
    await api.wait_for(lambda: "You picked SOS." in api.texts(ALICE))
    assert answer_seen(harness.script.requests[1]) == {"status": "answered", "answer": "SOS"}
    assert len(harness.script.requests) == 2


@pytest.mark.parametrize("how", ["button", "text"])
async def test_the_question_card_is_finalised_once_answered(harness, how):
    harness.script.add(ask(), echo_answer)
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "screen for me", user_id=ALICE)
    q = await question_card(api)
    if how == "button":
        api.push_callback(ALICE, q["message_id"], buttons_of(q)[1]["callback_data"], user_id=ALICE)
    else:
        api.push_text(ALICE, "2", user_id=ALICE)
    await api.wait_for(lambda: "You picked SOS." in api.texts(ALICE))
    final = await api.wait_for(
        lambda: (m := api.messages[(ALICE, q["message_id"])])["text"].endswith("✅ Answered: SOS") and m
    )
    assert not buttons_of(final), "the answered question still shows its option buttons"
    assert final["text"].endswith("✅ Answered: SOS")
    # its reference is used up: nothing is left to edit
    assert await harness.app.store.load_sent("question", q_turn(harness)) is None


async def test_a_question_left_for_a_new_request_shows_it_was_skipped(harness):
    harness.script.add(ask(), reply("Here is the market."))
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "screen for me", user_id=ALICE)
    q = await question_card(api)
    api.push_text(ALICE, "/new", user_id=ALICE)
    await api.wait_for(lambda: not buttons_of(api.messages[(ALICE, q["message_id"])]))
    assert api.messages[(ALICE, q["message_id"])]["text"].endswith("↪️ Skipped — you moved on")


async def test_a_question_that_cannot_be_delivered_is_closed_at_once(harness):
    harness.script.add(ask(), lambda req: reply(f"Closed: {answer_seen(req)['status']}."))
    await harness.start()
    api = harness.api
    forbidden = (403, {"ok": False, "error_code": 403, "description": "Forbidden: bot was blocked"})
    api.fail_when("sendMessage", forbidden, match=has_buttons)  # the question, not the progress line
    api.push_text(ALICE, "screen for me", user_id=ALICE)
    await api.wait_for(lambda: len(harness.script.requests) == 2)
    assert answer_seen(harness.script.requests[1]) == {"status": "undeliverable", "answer": ""}


# ---- 2. a question survives a restart ---------------------------------------------------------------


@pytest.mark.parametrize("how", ["text", "button"])
async def test_a_question_is_answered_after_a_restart(harness, how):
    harness.script.add(ask())
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "screen for me", user_id=ALICE)
    q = await question_card(api)
    await harness.stop()
    # a new process on the same home: nothing of the old one's memory survives
    harness.script = ScriptedClient([echo_answer])
    await harness.start()
    if how == "text":
        api.push_text(ALICE, "2", user_id=ALICE)
    else:
        api.push_callback(ALICE, q["message_id"], buttons_of(q)[1]["callback_data"], user_id=ALICE)
    await api.wait_for(lambda: "You picked SOS." in api.texts(ALICE))
    assert len(harness.script.requests) == 1
    assert answer_seen(harness.script.requests[0]) == {"status": "answered", "answer": "SOS"}


# ---- 3. two chats in parallel -----------------------------------------------------------------------


class HeldClient(ScriptedClient):
    """Answers every call with "answer to <first user text>"; a call whose conversation starts
    with `held_text` waits for `release` (the turn stays running meanwhile)."""

    def __init__(self, held_text: str) -> None:
        super().__init__(default=lambda r: reply(f"answer to {r.messages[0].text}"))
        self.held_text = held_text
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    async def stream(self, request):
        if request.messages and request.messages[0].text == self.held_text:
            self.held.set()
            await self.release.wait()
        async for chunk in super().stream(request):
            yield chunk


async def test_a_blocked_chat_does_not_hold_up_another_chat(tmp_path):
    h = Harness(tmp_path / "home", FakeBotAPI(), HeldClient("from alice"))
    api = h.api
    try:
        await h.start()
        api.push_text(ALICE, "from alice", user_id=ALICE)
        await asyncio.wait_for(h.script.held.wait(), 3)
        api.push_text(BOB, "from bob", user_id=BOB)
        await api.wait_for(lambda: "answer to from bob" in api.texts(BOB))
        assert "answer to from alice" not in api.texts(ALICE)  # still blocked
        h.script.release.set()
        await api.wait_for(lambda: "answer to from alice" in api.texts(ALICE))
        assert len(h.script.requests) == 2
    finally:
        h.script.release.set()
        await h.stop()


# ---- 4. the same update delivered twice is processed once ---------------------------------------


async def forgotten(api: FakeBotAPI, update_id: int) -> None:
    """Wait until the bot confirmed `update_id` (Telegram forgets it): it was fetched and handled."""
    await api.wait_for(lambda: all(u["update_id"] != update_id for u in api.updates))
    await asyncio.sleep(0.15)  # anything it started has had time to reach the model


async def test_an_update_delivered_again_after_a_restart_is_processed_once(harness):
    harness.script.add(reply("Only once."))
    await harness.start()
    api = harness.api
    uid = api.push_text(ALICE, "analyze 600519", user_id=ALICE)
    await api.wait_for(lambda: "Only once." in api.texts(ALICE))
    await harness.stop()
    # the confirming offset never reached Telegram (a crash before the next getUpdates)
    api.redeliver(uid)
    harness.script = ScriptedClient()  # any model call would be a second processing
    await harness.start()
    await forgotten(api, uid)
    assert harness.script.requests == []
    assert api.texts(ALICE) == ["Only once."]


async def test_a_duplicate_update_id_in_one_run_is_processed_once(harness):
    harness.script.add(reply("Only once."))
    api = harness.api
    uid = api.push_text(ALICE, "analyze 600519", user_id=ALICE)
    api.redeliver(uid)  # the same update twice in one batch
    await harness.start()
    await api.wait_for(lambda: "Only once." in api.texts(ALICE))
    api.redeliver(uid)  # and once more, later, with its original id
    await forgotten(api, uid)
    assert len(harness.script.requests) == 1
    assert api.texts(ALICE) == ["Only once."]


# ---- 5. A17: an unattended brief never gets an approval ---------------------------------------------


async def test_a_brief_that_calls_an_approval_tool_is_denied_without_a_card(tmp_path):
    seen: list[dict] = []

    def after_denial(req):
        result = req.messages[-1].tool_results[0]
        seen.append({"name": result.name, "is_error": result.is_error, "content": result.content})
        return reply("Brief for today: I did not save the plan (needs your approval in chat).")

    script = ScriptedClient(
        [reply(tool_calls=[("write_file", {"path": "brief.txt", "content": "auto"})]), after_denial]
    )
    h = Harness(tmp_path / "home", FakeBotAPI(), script, extra_env={"TAPEBOT_SCHEDULER__ENABLED": "true"})
    api = h.api
    try:
        await h.start()
        api.push_text(ALICE, "/brief now", user_id=ALICE)
        await api.wait_for(lambda: any("Brief for today" in t for t in api.texts(ALICE)), timeout=10)
        await asyncio.sleep(0.1)  # absence: time for a third model call
        assert len(script.requests) == 2
        assert seen[0]["name"] == "write_file" and seen[0]["is_error"]
        assert "approval" in seen[0]["content"].lower()
        assert not any(buttons_of(m) for m in api.sent(ALICE))  # no card, nobody to tap it
        assert not (h.home / "workspace" / "brief.txt").exists()
        assert approvals(h.home) == []  # never even asked
    finally:
        await h.stop()


# ---- 6. flood control ----------------------------------------------------------------------------


class VirtualTime:
    """The loop `aiolimiter.AsyncLimiter` sees: a clock that only moves when the test says so,
    and timers that fire when it passes them (futures and call_soon stay on the real loop)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.now, self.timers = loop, 1000.0, []

    def time(self) -> float:
        return self.now

    def is_closed(self) -> bool:
        return False

    def create_future(self):
        return self.loop.create_future()

    def call_soon(self, cb, *args):
        return self.loop.call_soon(cb, *args)

    def call_at(self, when, cb, *args):
        handle = asyncio.TimerHandle(when, cb, args, self.loop)
        self.timers.append(handle)
        return handle

    async def advance(self, seconds: float) -> None:
        self.now += seconds
        due = sorted((h for h in self.timers if not h.cancelled() and h.when() <= self.now),
                     key=lambda h: h.when())  # fmt: skip
        self.timers = [h for h in self.timers if not h.cancelled() and h not in due]
        for h in due:
            h._run()
        await asyncio.sleep(0.05)  # let the released sends reach the fake


@pytest.fixture
async def virtual_time(monkeypatch) -> VirtualTime:
    import adapters.ratelimit as ratelimit

    clock = VirtualTime(asyncio.get_running_loop())

    class VirtualLimiter(ratelimit.AsyncLimiter):
        @property
        def _loop(self):
            return clock

    monkeypatch.setattr(ratelimit, "AsyncLimiter", VirtualLimiter)
    return clock


def paragraphs(n: int, size: int = 3000) -> list[str]:
    """`n` paragraphs no two of which fit one Telegram message: one message each."""
    return [f"Part {i:02d}: " + "x" * size for i in range(n)]


async def test_a_burst_to_one_group_is_spaced_out_at_twenty_a_minute(tmp_path, virtual_time):
    parts = paragraphs(23)
    h = Harness(tmp_path / "home", FakeBotAPI(), ScriptedClient([reply("\n\n".join(parts))]))
    api = h.api

    def sent_to_group() -> list[str]:
        return [
            c.params.get("text", "") for c in api.calls_to("sendMessage") if int(c.params["chat_id"]) == GROUP
        ]

    try:
        await h.start()
        api.push_text(GROUP, "@tapebot_test_bot the long report", user_id=ALICE)
        await api.wait_for(lambda: len(sent_to_group()) >= 20)
        await asyncio.sleep(0.2)  # absence: time for a 21st send beyond the group's budget
        assert len(sent_to_group()) == 20  # the group's budget: 20 at once, then one per 3 s
        await virtual_time.advance(2.9)
        assert len(sent_to_group()) == 20
        await virtual_time.advance(0.15)
        assert len(sent_to_group()) == 21
        await virtual_time.advance(3.0)
        assert len(sent_to_group()) == 22
        await virtual_time.advance(3.0)
        await api.wait_for(lambda: len(api.texts(GROUP)) == 23)
        assert [t[:7] for t in api.texts(GROUP)] == [p[:7] for p in parts]  # in order, nothing lost
        assert h.app.gateway.adapters["telegram"].limiter.retries == 0  # no 429 was needed
    finally:
        await h.stop()


async def test_a_429_on_the_approval_card_is_waited_out_and_the_card_delivered(tmp_path):
    clock = FakeClock()
    script = ScriptedClient(
        [reply(tool_calls=[("write_file", {"path": "plan.txt", "content": "max 15%"})]), reply("Saved.")]
    )
    h = OptionsHarness(tmp_path / "home", FakeBotAPI(), script, sleep=clock.sleep)
    api = h.api
    api.fail_when("sendMessage", retry_after(7), match=has_buttons)
    try:
        await h.start()
        api.push_text(ALICE, "save my plan", user_id=ALICE)
        card = await api.wait_for_card(ALICE)
        assert clock.sleeps == [pytest.approx(7.1)]  # waited retry_after (+0.1), once
        assert len([c for c in api.calls_to("sendMessage") if has_buttons(c.params)]) == 2  # no hot loop
        once = button_of(card, "o")
        api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
        await api.wait_for(lambda: "Saved." in api.texts(ALICE))
        assert (h.home / "workspace" / "plan.txt").read_text() == "max 15%"
        assert [(tool, status) for _, tool, status, _ in approvals(h.home)] == [("write_file", "approved")]
    finally:
        await h.stop()


# ---- 7. the card was delivered, but the bot was told the send failed ----------------------------

AMBIGUOUS = {
    "500": (500, {"ok": False, "error_code": 500, "description": "Internal Server Error"}),
    "timeout": TimedOut(),
}


def decision_taps(api: FakeBotAPI, chat: int) -> list[tuple[int, str]]:
    """(message id, callback data) of the "once" button of every card visible in the chat."""
    return [
        (m["message_id"], b["callback_data"])
        for m in api.sent(chat)
        for b in buttons_of(m)
        if b["callback_data"].startswith("o:")
    ]


@pytest.mark.parametrize("failure", sorted(AMBIGUOUS))
async def test_an_ambiguous_card_send_resolves_once_whichever_card_is_tapped(tmp_path, failure):
    """The card reached the chat but the bot was told the send failed. Whatever the bot does
    about it (deny, resend, wait), every visible card is tapped, twice: the approval resolves
    once, the tool runs at most once, and the model gets one result for the call."""
    script = ScriptedClient(
        [reply(tool_calls=[("write_file", {"path": "d6.txt", "content": "x"})])],
        default=lambda r: reply("After the approval: " + r.messages[-1].tool_results[0].content[:80]),
    )
    h = Harness(tmp_path / "home", FakeBotAPI(), script)
    api = h.api
    api.fail_after("sendMessage", AMBIGUOUS[failure], match=has_buttons)
    try:
        app = await h.start()
        runs = count_runs(app, "write_file")
        api.push_text(ALICE, "save d6", user_id=ALICE)
        await api.wait_for(lambda: decision_taps(api, ALICE))
        await asyncio.sleep(0.3)  # whatever the bot does after the failure, it has done
        taps = decision_taps(api, ALICE)
        for message_id, data in taps:
            for _ in range(2):
                api.push_callback(ALICE, message_id, data, user_id=ALICE)
        await api.wait_for(lambda: len(api.callback_answers) == 2 * len(taps))
        await api.wait_for(lambda: any("After the approval" in t for t in api.texts(ALICE)))
        await asyncio.sleep(0.2)  # absence: time for a second decision to run the call again
        rows = approvals(h.home)
        assert len(rows) == 1 and rows[0][2] in ("approved", "denied"), rows  # decided, once
        assert len(runs) == (1 if rows[0][2] == "approved" else 0)
        assert (h.home / "workspace" / "d6.txt").exists() == (len(runs) == 1)
        last = script.requests[-1].messages
        assert len([r for m in last for r in m.tool_results if r.name == "write_file"]) == 1
        assert sum("After the approval" in t for t in api.texts(ALICE)) == 1
    finally:
        await h.stop()


@pytest.mark.parametrize("failure", sorted(AMBIGUOUS))
async def test_a_card_tapped_before_the_bot_learns_its_send_failed_runs_the_tool_once(tmp_path, failure):
    """The user taps the card while the sendMessage answer is still on its way; then the bot is
    told the send failed. The approval given stands: the tool runs once, nothing is denied."""
    script = ScriptedClient(
        [reply(tool_calls=[("write_file", {"path": "d6.txt", "content": "y"})]), reply("Saved it.")]
    )
    h = Harness(tmp_path / "home", FakeBotAPI(), script)
    api = h.api

    async def tap_first(card: dict) -> None:
        once = button_of(card, "o")
        api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
        await api.wait_for(lambda: api.callback_answers)  # the tap was handled

    api.fail_after("sendMessage", AMBIGUOUS[failure], match=has_buttons, before_reply=tap_first)
    try:
        app = await h.start()
        runs = count_runs(app, "write_file")
        api.push_text(ALICE, "save d6", user_id=ALICE)
        await api.wait_for(lambda: "Saved it." in api.texts(ALICE))
        await asyncio.sleep(0.2)  # absence: time for the call to run a second time
        assert len(runs) == 1
        assert (h.home / "workspace" / "d6.txt").read_text() == "y"
        assert [status for _, _, status, _ in approvals(h.home)] == ["approved"]
        assert "text" not in api.callback_answers[0]  # the tap was accepted, not "no longer valid"
        assert len(script.requests) == 2
    finally:
        await h.stop()


@pytest.mark.parametrize("window", ["card_send_in_flight", "progress_edit_in_flight"])
async def test_a_card_tapped_before_the_turn_has_suspended_runs_the_tool_once(tmp_path, window):
    """No failure at all: the user taps the card while the turn is still finishing (the card's
    sendMessage answer, or the progress-line edit after it, is on its way — e.g. held up by a
    group's flood limit). The approval must still lead to the action."""
    script = ScriptedClient(
        [reply(tool_calls=[("write_file", {"path": "fast.txt", "content": "z"})]), reply("Saved it.")]
    )
    h = Harness(tmp_path / "home", FakeBotAPI(), script)
    api = h.api

    async def tap_the_card(_result) -> None:
        card = next(m for m in api.sent(ALICE) if buttons_of(m))
        once = button_of(card, "o")
        api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
        await api.wait_for(lambda: api.callback_answers)

    if window == "card_send_in_flight":
        api.delay_reply("sendMessage", tap_the_card, match=has_buttons)
    else:
        api.delay_reply("editMessageText", tap_the_card, match=lambda p: "write_file" in p.get("text", ""))
    try:
        app = await h.start()
        runs = count_runs(app, "write_file")
        api.push_text(ALICE, "save fast", user_id=ALICE)
        await api.wait_for(lambda: api.callback_answers)
        assert "text" not in api.callback_answers[0]  # the tap was accepted
        await api.wait_for(lambda: "Saved it." in api.texts(ALICE), timeout=1.5)
        assert len(runs) == 1
        assert (h.home / "workspace" / "fast.txt").read_text() == "z"
    finally:
        await h.stop()


def q_turn(harness) -> str:
    """The id of the test's first turn (the one that asked)."""
    import sqlite3

    con = sqlite3.connect(harness.home / "tapebot.db")
    try:
        return con.execute("SELECT id FROM turns ORDER BY created_at LIMIT 1").fetchone()[0]
    finally:
        con.close()
