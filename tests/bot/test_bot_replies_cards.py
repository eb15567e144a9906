"""WaitingState replies and approval cards (pure logic)."""

from __future__ import annotations

import pytest

from agent.consent import standing_scope
from agent.ports import ApprovalRecord, WaitingState, args_hash
from bot import cards
from bot.replies import option_index, read_reply

Q = WaitingState(kind="question", question="Which?", options=["Spring", "UTAD", "LPS"])
A = WaitingState(kind="approval", question="Allow?", options=["once", "always", "deny"])


@pytest.mark.parametrize("text", ["yes", "Y", "ok", "好", "好的", "是", "确认", "可以", "行", "OK!"])
def test_yes_words(text):
    assert read_reply(text, A).kind == "yes"


@pytest.mark.parametrize("text", ["no", "n", "不", "不用", "取消", "No."])
def test_no_words(text):
    assert read_reply(text, A).kind == "no"


@pytest.mark.parametrize(
    "text,value",
    [
        ("2", "UTAD"),
        ("the second one", "UTAD"),
        ("第二个", "UTAD"),
        ("#3", "LPS"),
        ("first", "Spring"),
        ("lps", "LPS"),
    ],
)
def test_option_choice(text, value):
    r = read_reply(text, Q)
    assert r.kind == "option" and r.value == value


def test_out_of_range_number_is_not_an_option():
    assert option_index("9", 3) is None


def test_command_or_change_of_mind_moves_on():
    assert read_reply("/new", Q, is_command=True).kind == "moved_on"
    assert read_reply("never mind, analyze 000001 instead", Q).kind == "moved_on"
    assert read_reply("算了，换个话题", Q).kind == "moved_on"


def test_free_text_answers_a_question_but_is_unclear_for_an_approval():
    w = WaitingState(kind="question", question="How many shares?", pending_fields=["quantity"])
    assert read_reply("300", w) == read_reply("300", w)
    assert read_reply("300", w).kind == "value"
    assert read_reply("buy 600519 please", A).kind == "unclear"  # never consent


def test_not_yes_negations_are_not_consent():
    assert read_reply("不确认", A).kind != "yes"
    assert read_reply("yes but no", A).kind != "yes"


def _record(args):
    return ApprovalRecord(
        id="abc123",
        session_id="s",
        turn_id="t",
        call_id="c",
        tool="execute_trade",
        arguments=args,
        args_hash=args_hash("execute_trade", args),
    )


def test_card_shows_bidi_and_control_characters_and_truncates_with_hash():
    record = _record({"note": "buy\u202e001 006", "x": "\x07"})
    info = cards.CardInfo(None, scope=standing_scope("manage_strategy", record.arguments, live_trading=False))
    text, buttons = cards.approval_card(record, "en", info)
    assert "<U+202E>" in text and "\\u0007" in text  # JSON escapes C0 controls itself
    assert [b.data for b in buttons[0]] == ["o:abc123", "a:abc123", "d:abc123"]
    long_text, _ = cards.approval_card(_record({"blob": "x" * 5000}), "zh", cards.CardInfo(None))
    assert "已截断" in long_text and "sha256" in long_text and len(long_text) < 2000  # in the chat's language


def test_callback_parsing_rejects_forgeries():
    assert cards.parse_callback("o:abc") == cards.CardTap("once", "abc")
    assert cards.parse_callback("a:abc") == cards.CardTap("always", "abc")
    assert cards.parse_callback("d:abc") == cards.CardTap("deny", "abc")
    assert cards.parse_callback("q2:t_1") == cards.OptionTap(2, "t_1")
    for bad in ["", "x:abc", "o:", "abc", "o" + ":" + "a" * 80, "q:t_1", "qq:t_1"]:
        assert cards.parse_callback(bad) is None


@pytest.mark.parametrize("digits", ["²", "٣", "３", "1²"])
def test_an_option_number_is_ascii_digits_only(digits):
    """Parsed once into an int: a forged "q²" (a digit to str.isdigit, not to int) is malformed,
    not a tap whose handling fails later."""
    assert cards.parse_callback(f"q{digits}:t_1") is None


def test_the_buttons_the_bot_sends_parse_back_to_what_they_stand_for():
    record = _record({"code": "600519", "side": "buy", "quantity": 100})
    info = cards.CardInfo(None, scope=standing_scope("manage_strategy", record.arguments, live_trading=False))
    _, rows = cards.approval_card(record, "en", info)
    taps = [cards.parse_callback(b.data) for b in rows[0]]
    assert taps == [cards.CardTap(c, record.id) for c in ("once", "always", "deny")]
    _, options = cards.question_prompt(Q, "t_9")
    assert [cards.parse_callback(row[0].data) for row in options] == [
        cards.OptionTap(i, "t_9") for i in (1, 2, 3)
    ]
