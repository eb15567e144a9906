"""Long-term memory end to end through Telegram: a discipline stated in one session is extracted at
`/new` (by the memory model, in the background), recalled into the next session's model call as
per-call context (`ModelRequest.context`), listed and forgotten with `/memory` — and never written
into the stored conversation.

Memory upkeep has its own model (`[memory] model = "mem"`), so the chat model's script stays turn by
turn while the memory model answers from the request (extraction, de-duplication, TaskState)."""

from __future__ import annotations

import json
import re

import pytest

from agent.providers.base import ModelRequest
from agent.providers.scripted import ScriptedClient, reply
from bot.app import App
from memory.extraction import DEDUP_PROMPT, SESSION_SUMMARY_PROMPT
from memory.taskstate import TASKSTATE_PROMPT
from tests.bot.conftest import ALICE, Harness, make_settings
from tests.fakes.telegram_api import FakeBotAPI, FakeRequest

DISCIPLINE = "I never buy at the open; no position above 15%. How is 600519 doing?"
QUESTION = "should I buy 600519 at the open tomorrow?"
REMEMBERED = "never buy at the open; no position above 15%"


def memory_model_answer(request: ModelRequest) -> list:
    """The memory model: answers whichever upkeep prompt it is given."""
    prompt = request.messages[-1].text if request.messages else ""
    if request.system == SESSION_SUMMARY_PROMPT:
        found = "never buy at the open" in prompt
        return reply(f"[preference] {REMEMBERED}" if found else "none")
    if request.system == DEDUP_PROMPT:
        return reply("NEW")
    if request.system == TASKSTATE_PROMPT:
        return reply(json.dumps({"goal": "review 600519", "open_loops": [], "important_facts": []}))
    return reply("none")


class MemoryHarness(Harness):
    """The Telegram harness with memory on and a separate memory model (`mem`)."""

    def __init__(self, home, api: FakeBotAPI):
        super().__init__(home, api, ScriptedClient(), extra_env={"TAPEBOT_MEMORY__ENABLED": "true"})
        self.memory_model = ScriptedClient(default=memory_model_answer)
        self.models_asked: list[str | None] = []

    def model_for(self, model_id: str | None) -> ScriptedClient:
        self.models_asked.append(model_id)
        return self.memory_model if model_id == "mem" else self.script

    async def start(self) -> App:
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "config.toml").write_text(
            '[[models]]\nid = "main"\nprovider = "openai"\nmodel = "gpt-test"\napi_key_env = "OPENAI_API_KEY"\n'
            '[[models]]\nid = "mem"\nprovider = "openai"\nmodel = "gpt-mem"\napi_key_env = "OPENAI_API_KEY"\n'
            '[memory]\nmodel = "mem"\n'
        )
        self.app = App(
            make_settings(self.home, self.extra_env),
            model_factory=self.model_for,
            adapter_options={
                "telegram": {
                    "request": FakeRequest(self.api),
                    "get_updates_request": FakeRequest(self.api),
                    "poll_timeout": 0.05,
                }
            },
        )
        await self.app.start(adapters=True)
        return self.app

    async def drain_memory(self) -> None:
        assert self.app is not None and self.app.tracker is not None
        assert await self.app.tracker.drain(10), "memory upkeep did not finish"


@pytest.fixture
async def mh(tmp_path):
    h = MemoryHarness(tmp_path / "home", FakeBotAPI())
    yield h
    await h.stop()


async def say(h: MemoryHarness, text: str, expect: str) -> str:
    """Send `text` as Alice and wait for a reply containing `expect`; returns that reply."""
    before = len(h.api.texts(ALICE))
    h.api.push_text(ALICE, text, user_id=ALICE)
    return await h.api.wait_for(
        lambda: next((t for t in h.api.texts(ALICE)[before:] if expect in t), None), timeout=10
    )


async def first_session_then_new(h: MemoryHarness) -> None:
    """Session 1: the discipline, with a tool call (so the extraction gates pass); then /new."""
    h.script.add(
        reply(tool_calls=[("get_market_price", {"code": "600519"})]),
        reply("Noted. 600519 is in range; I will respect your limits."),
    )
    await say(h, DISCIPLINE, "Noted.")
    await h.drain_memory()  # after_turn: TaskState on the memory model
    await say(h, "/new", "")
    await h.drain_memory()  # session_end: extraction on the memory model


def recall_check(request: ModelRequest) -> list:
    if "<relevant-memories>" in request.context and "never buy at the open" in request.context:
        return reply("No: you never buy at the open. Wait for the afternoon and keep it under 15%.")
    return reply("I have no memory of your rules.")


async def test_discipline_is_extracted_at_new_and_recalled_in_the_next_session(mh):
    app = await mh.start()
    await first_session_then_new(mh)
    assert "mem" in mh.models_asked  # `[memory] model` reached the model factory
    systems = [r.system for r in mh.memory_model.requests]
    assert SESSION_SUMMARY_PROMPT in systems and TASKSTATE_PROMPT in systems
    assert all(r.system not in (SESSION_SUMMARY_PROMPT, TASKSTATE_PROMPT) for r in mh.script.requests)
    saved = await app.memory.store.recent(None)
    assert [m.content for m in saved] == [REMEMBERED]
    assert saved[0].memory_type == "preference" and saved[0].source_ref.startswith("chat_log:")

    mh.script.add(recall_check)
    answer = await say(mh, QUESTION, "open")
    assert "you never buy at the open" in answer
    request = mh.script.requests[-1]
    assert REMEMBERED in request.context and request.context.startswith("<relevant-memories>")
    # the new session starts clean: the model sees only the question, the memory comes as context
    assert [m.text for m in request.messages] == [QUESTION]


async def test_memory_command_lists_traces_and_forgets_the_discipline(mh):
    app = await mh.start()
    await first_session_then_new(mh)
    mh.script.add(recall_check)
    await say(mh, QUESTION, "you never buy")  # the new session now has a turn (and a session row)
    listing = await say(mh, "/memory", REMEMBERED)
    found = re.search(r"#(\d+) \S+ L1/preference " + re.escape(REMEMBERED), listing)
    assert found, listing
    memory_id = found.group(1)
    trace = await say(mh, f"/memory trace {memory_id}", "source:")
    assert f"#{memory_id}" in trace and "source: chat_log:telegram:" in trace
    await say(mh, f"/memory forget {memory_id}", "forgot")
    assert await app.memory.store.recent(None) == []
    await say(mh, "/memory", "no memories yet")
    # forgotten means not recalled either
    mh.script.add(recall_check)
    answer = await say(mh, QUESTION, "memory")
    assert "no memory of your rules" in answer
    assert "never buy at the open" not in mh.script.requests[-1].context


async def test_memory_command_right_after_new_lists_the_users_memories(mh):
    await mh.start()
    await first_session_then_new(mh)
    await say(mh, "/memory", "")
    assert any(REMEMBERED in t for t in mh.api.texts(ALICE)[-1:])


async def test_memory_trace_in_chat_shows_what_the_user_said(mh):
    app = await mh.start()
    await first_session_then_new(mh)
    mh.script.add(recall_check)
    await say(mh, QUESTION, "you never buy")
    (memory,) = await app.memory.store.recent(None)
    trace = await say(mh, f"/memory trace {memory.id}", "source:")
    assert f"#{memory.id}" in trace
    assert "user said" in trace and "never buy at the open" in trace


async def test_stored_user_messages_keep_the_original_text(mh):
    app = await mh.start()
    await first_session_then_new(mh)
    mh.script.add(recall_check)
    await say(mh, QUESTION, "you never buy")
    assert REMEMBERED in mh.script.requests[-1].context
    sessions = await app.store.list_sessions(include_archived=True)
    assert len(sessions) >= 2
    stored = [m for s in sessions for m in await app.store.load_messages(s.id)]
    user_texts = sorted(m.text for m in stored if m.role == "user")
    assert user_texts == sorted([DISCIPLINE, QUESTION])
    for m in stored:
        assert "<relevant-memories>" not in m.text and "<current-user-message>" not in m.text
