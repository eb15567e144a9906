"""/compact over Telegram: the history is summarised and archived, and the chat is told."""

from __future__ import annotations

from agent.messages import Message
from agent.providers.scripted import reply
from tests.bot.conftest import ALICE


async def test_compact_command_summarises_and_archives(harness):
    await harness.start()
    app, api = harness.app, harness.api
    api.push_text(ALICE, "/status", user_id=ALICE)  # creates the chat's session
    await api.wait_for(lambda: any("Session" in t for t in api.texts(ALICE)))
    state = await app.gateway.chats.by_key(f"telegram:{ALICE}")
    history = []
    for i in range(30):
        history += [
            Message.user(f"question {i} about 600519 " + "x" * 400),
            Message.assistant(f"answer {i} " + "y" * 400),
        ]
    await app.store.commit(state.session_id, messages=history)
    harness.script.add(
        reply("Summary: the user asked thirty questions about 600519 (贵州茅台); answers covered its range.")
    )
    api.push_text(ALICE, "/compact", user_id=ALICE)
    await api.wait_for(lambda: any("compacted" in t for t in api.texts(ALICE)), timeout=10)
    after = await app.store.load_messages(state.session_id)
    assert len(after) < len(history)
    assert any("Summary:" in m.text for m in after)
    assert list((harness.home / "archive").rglob("*.jsonl")), "the original head is archived"


async def test_compact_reports_a_failed_summary_as_a_failure(harness):
    """The summary call fails: the chat is told compaction failed and the history is kept — not
    "Nothing to compact"."""
    from agent.errors import RetryableModelError

    await harness.start()
    app, api = harness.app, harness.api
    api.push_text(ALICE, "/status", user_id=ALICE)
    await api.wait_for(lambda: any("Session" in t for t in api.texts(ALICE)))
    state = await app.gateway.chats.by_key(f"telegram:{ALICE}")
    history = []
    for i in range(30):
        history += [Message.user(f"question {i} " + "x" * 400), Message.assistant(f"answer {i} " + "y" * 400)]
    await app.store.commit(state.session_id, messages=history)
    harness.script.add(RetryableModelError("provider down (HTTP 503)"))
    api.push_text(ALICE, "/compact", user_id=ALICE)
    await api.wait_for(lambda: any("ompact" in t and "fail" in t for t in api.texts(ALICE)), timeout=10)
    assert not any("Nothing to compact" in t for t in api.texts(ALICE))
    assert len(await app.store.load_messages(state.session_id)) == len(history)  # kept
