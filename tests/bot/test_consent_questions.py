"""Question words are never consent: "yes?", "ok?", "可以？", "真的吗",
"really?", "is it ok" and every other question form of an affirmative leave an approval card
pending, on every surface. Example tests name the forms that filled a trade before; the property
tests generate question forms of every word that allows (agent/consent.AFFIRMATIVE and STANDING);
the flow tests run them through the fake Telegram Bot API and the fake Discord gateway (the
terminal: tests/cli/test_terminal_card_reply.py).
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.consent import AFFIRMATIVE, NEGATIVE, QUESTION_MARKS, STANDING, asks, read_consent, standing_scope
from agent.providers.scripted import reply
from bot.i18n import t
from tests.bot import test_bot_discord_flow as discord_flow
from tests.bot.conftest import ALICE
from tests.bot.test_bot_approval_integrity import approval_row, card_in
from tests.bot.test_bot_consent_flow import BUY, approval_id, said, trades

discord_app = discord_flow.discord_app

TRADE_SCOPE = standing_scope("execute_trade", BUY, live_trading=False)
ALLOW_WORDS = sorted(AFFIRMATIVE | STANDING)
SEEN = ["yes?", "ok?", "可以？", "真的吗", "really?", "is it ok", "OK?", "Yes ?", "yes??", "好的?", "确认吗"]


def _never_allows(text: str) -> None:
    for scope in (TRADE_SCOPE, None):
        for replying in (False, True):
            decision = read_consent("text", text, scope=scope, replying_to_card=replying)
            assert not decision.allows, (text, scope, replying, decision)
            assert decision.kind in ("unclear", "edit"), decision


# ---- question words: the forms seen to fill a trade ----------------------------------------------
@pytest.mark.parametrize("text", SEEN)
def test_question_words_seen_to_approve_never_allow(text):
    assert asks(text)
    _never_allows(text)
    assert read_consent("text", text, scope=TRADE_SCOPE).question


@pytest.mark.parametrize(
    "text",
    ["¿yes", "yes‽", "ok⁇", "好？", "可以吗", "可以嗎", "好不好", "可不可以", "是不是", "行不行", "是吧",
     "确认呢", "到底可以", "真的可以", "yes really", "ok, right", "are you sure", "do it?", "yes ?",
     "yes\u200b?", "ok\ufe56", "ok\uff1f", "yes\U0001f914?", "really ok", "should i say yes",
     "yes or not", "is it okay", "Yes?!", "ok?.", "ok ?。"],
)  # fmt: skip
def test_question_words_in_other_scripts_and_particles_never_allow(text):
    assert asks(text)
    _never_allows(text)


def test_the_words_themselves_still_decide_and_are_no_questions():
    for word in ALLOW_WORDS + sorted(NEGATIVE):
        assert not asks(word), word
    assert read_consent("text", "yes.").kind == "allow_once"
    assert read_consent("text", "好的！").kind == "allow_once"
    assert read_consent("text", "always", scope=TRADE_SCOPE).kind == "allow_standing"
    assert read_consent("text", "no").kind == "deny"


# ---- properties: question forms of every affirmative ---------------------------------------------
_space = st.text(alphabet=" \t\u3000\u200b\u200d", max_size=2)
_punct = st.text(alphabet="!！。.,，~～、;；:：", max_size=2)
_marks = st.text(alphabet=sorted(QUESTION_MARKS), min_size=1, max_size=3)
_word = st.sampled_from(ALLOW_WORDS).flatmap(
    lambda w: st.sampled_from([w, w.upper(), w.capitalize()]) if w.isascii() else st.just(w)
)


def _zh_a_not_a(word: str) -> str:
    return f"{word[0]}不{word}" if word[0] != "不" else word + "吗"


question_form = st.one_of(
    # a question mark of any script, anywhere around the word
    st.tuples(_space, _word, _space, _marks, _punct).map("".join),
    st.tuples(_marks, _space, _word, _punct).map("".join),
    st.tuples(_word, _punct, _marks, _space).map("".join),
    # a Chinese particle, with or without its mark
    st.tuples(
        _word,
        st.sampled_from(["吗", "嗎", "么", "嘛", "呢", "吧"]),
        st.sampled_from(["", "？", "?", "。", "~"]),
    ).map("".join),
    # A-not-A ("好不好", "可不可以") and the doubting words around it
    st.tuples(st.sampled_from(["", "真的", "到底", "是否"]), _word.map(_zh_a_not_a)).map("".join),
    st.tuples(st.sampled_from(["真的", "难道", "究竟"]), _word, _punct).map("".join),
    # English question forms
    st.tuples(
        st.sampled_from(
            [
                "is it ",
                "are you sure ",
                "really ",
                "Really, ",
                "should I say ",
                "can I say ",
                "do you want a ",
                "what if I say ",
                "Is it ",
                "why ",
            ]
        ),
        _word,
        _punct,
    ).map("".join),
    st.tuples(
        _word,
        st.sampled_from([" really", ", right", " right", " or not", ", is it", " isn't it", " really?"]),
    ).map("".join),
)


@settings(max_examples=1500, deadline=None)
@given(text=question_form)
def test_property_question_forms_of_every_affirmative_never_allow(text):
    """Question words: whatever wraps the word, a question is never an allow, replying to the
    card or not, with "Always allow" offered or not."""
    assert asks(text), text
    _never_allows(text)


@settings(max_examples=600, deadline=None)
@given(text=st.text(max_size=30), mark=st.sampled_from(sorted(QUESTION_MARKS)), at=st.integers(0, 30))
def test_property_any_text_with_a_question_mark_never_allows(text, mark, at):
    at = min(at, len(text))
    _never_allows(text[:at] + mark + text[at:])


# ---- through the fake Telegram Bot API: a paper trade card ---------------------------------------
@pytest.mark.parametrize("text", ["yes?", "ok?", "可以？", "真的吗"])
async def test_question_words_at_a_trade_card_on_telegram_fill_nothing(harness, text):
    harness.script.add(reply(tool_calls=[("execute_trade", BUY)]), reply("Bought."))
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "buy 100 moutai", user_id=ALICE)
    card = await card_in(api, ALICE)
    api.push_text(ALICE, text, user_id=ALICE)
    await said(api, ALICE, t("en", "approval_question"))
    await asyncio.sleep(0.1)  # absence: time for the question to be taken as consent
    assert approval_row(harness.home, approval_id(card))["status"] == "pending"  # the card stays
    assert trades(harness.home) == [] and len(harness.script.requests) == 1
    # the exact word then approves, once
    api.push_text(ALICE, "yes", user_id=ALICE)
    await said(api, ALICE, "Bought.")
    assert [(r[0], r[1], r[2]) for r in trades(harness.home)] == [("600519", "buy", 100)]


async def test_question_words_at_a_trade_card_on_discord_fill_nothing(discord_app):
    from tests.bot.test_bot_discord_flow import USER as D_USER
    from tests.bot.test_bot_discord_flow import components

    fake, script, start, home = discord_app
    await start()
    script.add(reply(tool_calls=[("execute_trade", BUY)]), reply("Bought on Discord."))
    await fake.push_dm(channel_id=300, user_id=D_USER, content="buy 100 moutai")
    await fake.wait_for(lambda: next((m for m in fake.bot_messages(300) if components(m)), None))
    await fake.wait_for(lambda: any("⏸" in m["content"] for m in fake.bot_messages(300)))
    await fake.push_dm(channel_id=300, user_id=D_USER, content="ok?")
    hint = t("en", "approval_question")
    await fake.wait_for(lambda: any(hint in m["content"] for m in fake.bot_messages(300)))
    assert trades(home) == [] and len(script.requests) == 1
