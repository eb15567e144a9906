"""A lone surrogate (half of an emoji's UTF-16 pair) from the platform, the model
or a tool is replaced at the edge and never stored; the session goes on working."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from agent.messages import Message
from agent.providers.scripted import reply
from agent.text import scrub
from tests.bot.conftest import ALICE

LONE = "\ud83d"


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF)))
def test_scrub_always_gives_encodable_text_and_keeps_good_text(text):
    out = scrub(text)
    assert _encodable(out)
    if _encodable(text):
        assert out == text


def test_scrub_replaces_only_the_lone_halves():
    assert scrub(f"a{LONE}b") == "a\ufffdb"
    assert scrub("\ud83d\ude00") == "😀"  # a pair split in two code points is joined
    assert scrub("ok 😀") == "ok 😀"


def test_messages_never_hold_unencodable_text():
    m = Message.user(f"hi {LONE}")
    assert _encodable(m.model_dump_json()) and m.text == "hi \ufffd"
    t = Message.tool_result("c1", "web_fetch", f"page {LONE}")
    assert _encodable(json.dumps(t.model_dump(), ensure_ascii=False))


async def test_a_lone_surrogate_from_the_model_and_from_the_user_does_not_break_the_session(harness):
    harness.script.add(
        reply(f"Here you go {LONE} done."),
        reply("Second answer fine."),
        reply("Third answer fine."),
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "first", user_id=ALICE)
    await api.wait_for(lambda: any("done." in t for t in api.texts(ALICE)))
    assert any("Here you go \ufffd done." in t for t in api.texts(ALICE))
    api.push_text(ALICE, f"second {LONE} question", user_id=ALICE)
    await api.wait_for(lambda: any("Second answer fine." in t for t in api.texts(ALICE)))
    api.push_text(ALICE, "third", user_id=ALICE)
    await api.wait_for(lambda: any("Third answer fine." in t for t in api.texts(ALICE)))
    sent_to_model = harness.script.requests[-1].messages
    assert any("second \ufffd question" in m.text for m in sent_to_model)
    assert not any("went wrong" in t for t in api.texts(ALICE))
