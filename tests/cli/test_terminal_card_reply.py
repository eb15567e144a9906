"""How the terminal reads a reply typed at a card (issue 15): a decision only through the chats'
function, a longer message or a command moves on, a short unclear reply stays — never an allow
for anything but the listed words."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.consent import AFFIRMATIVE, STANDING, normalize, read_consent, standing_scope
from bot.terminal import read_card_reply

SCOPE = standing_scope("write_file", {"path": "plan.txt", "content": "x"}, live_trading=False)


def test_examples():
    assert read_card_reply("yes", SCOPE) == "once"
    assert read_card_reply("总是允许", SCOPE) == "always"
    assert read_card_reply("no", SCOPE) == "deny"
    assert read_card_reply("", SCOPE) == "deny"  # silence is a no
    assert read_card_reply("3", SCOPE) == "unclear"
    assert read_card_reply("👍", SCOPE) == "unclear"
    assert read_card_reply("what is my biggest position?", SCOPE) == "moved_on"
    assert read_card_reply("/exit", SCOPE) == "moved_on"
    assert read_card_reply("/new", SCOPE) == "moved_on"


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=60) | st.sampled_from(sorted(AFFIRMATIVE | STANDING)))
def test_property_only_listed_words_allow_and_only_long_or_commands_move_on(text):
    reading = read_card_reply(text, SCOPE)
    if reading in ("once", "always"):
        assert normalize(text) in AFFIRMATIVE | STANDING
        assert reading == read_consent("text", text, scope=SCOPE).gate_decision
    if reading == "moved_on":
        assert text.strip().startswith("/") or " " in normalize(text) or len(normalize(text)) > 12
