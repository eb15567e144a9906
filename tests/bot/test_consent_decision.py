"""The one decision function (agent/consent.py) and the scope of standing approvals.

Example tests for each consent word, and property-based tests: no text outside the
documented affirmative list ever allows, on any surface (a chat's typed reply, the terminal prompt,
a button's callback data, a command).
"""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.consent import (
    AFFIRMATIVE,
    NEGATIVE,
    STANDING,
    StandingScope,
    normalize,
    read_consent,
    standing_scope,
)
from bot import cards
from tests.fakes.clock import FakeClock

TRADE = {"code": "600519", "side": "buy", "quantity": 100}
TRADE_SCOPE = standing_scope("execute_trade", TRADE, live_trading=False)
ALLOW_WORDS = AFFIRMATIVE | STANDING


# ---- item 1: "deny", "Deny", "3", "第三个" never allow ------------------------------------------
@pytest.mark.parametrize("text", ["deny", "Deny", "DENY", "no", "不", "拒绝", "取消", "No."])
def test_no_words_deny(text):
    for replying in (False, True):
        assert read_consent("text", text, scope=TRADE_SCOPE, replying_to_card=replying).kind == "deny"


@pytest.mark.parametrize(
    "text",
    [
        "3",
        "1",
        "2",
        "第三个",
        "第一个",
        "option 1",
        "once",
        "#1",
        "a",
        "👍",
        "✅",
        "what?",
        "why",
        "嗯",
        "行",
        "对",
    ],
)
def test_option_numbers_emoji_questions_and_unknown_words_are_never_allow(text):
    decision = read_consent("text", text, scope=TRADE_SCOPE)
    assert decision.kind == "unclear" and not decision.allows
    # a reply to the card that is no yes/no asks for a change: a denial that carries the note
    assert read_consent("text", text, scope=TRADE_SCOPE, replying_to_card=True).kind == "edit"


@pytest.mark.parametrize(
    "text", ["yes", "Y", "ok", "OK!", "okay", "好", "好的", "确认", "可以", "同意", " yes. "]
)
def test_the_documented_affirmatives_allow_once(text):
    assert read_consent("text", text, scope=None).kind == "allow_once"


def test_always_is_a_standing_approval_only_where_it_is_offered():
    assert read_consent("text", "always", scope=TRADE_SCOPE).kind == "allow_standing"
    assert read_consent("text", "always", scope=TRADE_SCOPE).scope == TRADE_SCOPE
    assert read_consent("text", "总是允许", scope=None).kind == "unclear"
    assert read_consent("button", "always", scope=None).kind == "unclear"


def test_lookalikes_are_not_ok():
    # a Kelvin sign, full-width letters, a zero-width joiner: unknown words, not "ok"
    for text in ["o\u212a", "ｏｋ", "o\u200dk", "yes\u202e", "ye s"]:
        assert not read_consent("text", text).allows, text


def test_buttons_and_commands():
    assert read_consent("button", "once").kind == "allow_once"
    assert read_consent("button", "deny").kind == "deny"
    assert read_consent("command", "approve").kind == "allow_once"
    assert read_consent("command", "deny").kind == "deny"
    assert read_consent("command", "always").kind == "unclear"


# ---- properties: no text outside the list ever allows, on every surface ---------------------------
any_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(sorted(NEGATIVE | ALLOW_WORDS)).flatmap(
        lambda w: st.tuples(st.text(max_size=3), st.just(w), st.text(max_size=3)).map("".join)
    ),
    st.from_regex(r"(第[一二三四五六七八九十]个?|#?\d{1,3}|option \d|[a-z]{1,3})", fullmatch=True),
    st.text(alphabet=st.characters(categories=["So", "Sk", "Cf", "Mn"]), max_size=6),
)


@settings(max_examples=600, deadline=None)
@given(text=any_text, replying=st.booleans(), offered=st.booleans())
def test_property_typed_reply_in_a_chat_allows_only_for_listed_words(text, replying, offered):
    scope = TRADE_SCOPE if offered else None
    decision = read_consent("text", text, scope=scope, replying_to_card=replying)
    if decision.allows:
        assert normalize(text) in ALLOW_WORDS
        # and the words themselves, up to ASCII case, surrounding space and trailing punctuation
        assert set(normalize(text)) <= set("".join(ALLOW_WORDS))
    if normalize(text) not in ALLOW_WORDS:
        assert not decision.allows


@settings(max_examples=300, deadline=None)
@given(text=any_text)
def test_property_terminal_prompt_allows_only_for_listed_words(text):
    """The terminal is a chat: a line typed at its card reaches the gateway as a message (see
    tests/adapters/test_console_adapter.py), read by the same function as in the chats; see also
    the pty tests in tests/cli/test_cli_consent_terminal.py and tests/cli/test_console_chat.py."""
    from bot import waiting

    assert waiting.read_consent is read_consent  # one function, not a copy
    decision = read_consent("text", text, scope=TRADE_SCOPE)
    assert decision.allows == (normalize(text) in ALLOW_WORDS)


@settings(max_examples=300, deadline=None)
@given(data=st.text(max_size=70))
def test_property_button_data_allows_only_for_the_allow_buttons(data):
    """Callback data is read once into a typed tap, which the decision function takes as it is."""
    tap = cards.parse_callback(data)
    if not isinstance(tap, cards.CardTap):
        # an option button (or nothing): never a decision on an approval
        assert tap is None or data.startswith("q")
        return
    assert data == f"{data[0]}:{tap.approval_id}" and data[0] in "oad"
    for scope in (TRADE_SCOPE, None):
        decision = read_consent("button", tap.choice, scope=scope)
        if decision.allows:
            assert data.split(":", 1)[0] in ("o", "a")
        if data[0] == "d":
            assert decision.kind == "deny"


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(["o", "a", "d", "q", "x", ""]),
    number=st.text(alphabet=st.characters(categories=["Nd", "No"]), max_size=3),
    ident=st.text(max_size=70),
)
def test_property_button_data_close_to_real_is_read_once_into_a_usable_value(kind, number, ident):
    """Data shaped like the bot's own: a tap is either malformed or fully typed (an option's
    number already an int), so nothing downstream parses it again or fails on it."""
    data = f"{kind}{number if kind == 'q' else ''}:{ident}"
    tap = cards.parse_callback(data)
    if tap is None:
        return
    assert len(data) <= cards.MAX_CALLBACK_DATA and ident
    if isinstance(tap, cards.OptionTap):
        assert kind == "q" and str(tap.index) == number.lstrip("0").rjust(1, "0")
        assert number.isascii()
    else:
        assert tap.choice == cards.DECISIONS[kind] and tap.approval_id == ident


@settings(max_examples=200, deadline=None)
@given(word=st.text(max_size=12))
def test_property_only_approve_command_allows(word):
    assert read_consent("command", word).allows == (word == "approve")


# ---- standing scopes ------------------------------------------------------------------------------
def test_trade_scope_covers_same_instrument_and_side_up_to_the_quantity():
    s = TRADE_SCOPE
    assert s is not None and s.covers("execute_trade", TRADE)
    assert s.covers("execute_trade", {**TRADE, "quantity": 50})
    assert not s.covers("execute_trade", {**TRADE, "quantity": 200})
    assert not s.covers("execute_trade", {**TRADE, "side": "sell"})
    assert not s.covers("execute_trade", {**TRADE, "code": "000001"})
    assert not s.covers("execute_trade", {**TRADE, "quantity": -100})
    assert not s.covers("execute_trade", {**TRADE, "quantity": True})
    assert not s.covers("update_portfolio", TRADE)


def test_no_standing_approval_for_trades_while_live_trading_is_on():
    assert standing_scope("execute_trade", TRADE, live_trading=True) is None


def test_a15_exec_command_is_never_offered_and_write_file_is_bound_to_its_path():
    """A15 (allow-always scope creep): "Always allow" on `sh -c X` must not approve `sh -c Y`;
    exec_command gets no standing approval at all, write_file one bound to the exact path."""
    for cmd in ("sh -c 'echo X'", "ls", "env sh -c id"):
        assert standing_scope("exec_command", {"command": cmd}, live_trading=False) is None
    w = standing_scope("write_file", {"path": "notes/plan.md", "content": "a"}, live_trading=False)
    assert w is not None and w.covers("write_file", {"path": "notes/plan.md", "content": "b"})
    assert not w.covers("write_file", {"path": "notes/other.md", "content": "a"})
    assert not w.covers("write_file", {"path": "../notes/plan.md", "content": "a"})
    assert not w.covers("exec_command", {"path": "notes/plan.md"})


def test_other_tools_are_bound_to_the_exact_arguments():
    s = standing_scope("manage_trader", {"action": "start", "trader": "t1"}, live_trading=False)
    assert s is not None and s.covers("manage_trader", {"trader": "t1", "action": "start"})
    assert not s.covers("manage_trader", {"action": "start", "trader": "t2"})


@settings(max_examples=200, deadline=None)
@given(
    code=st.text(alphabet=string.digits, min_size=6, max_size=6),
    side=st.sampled_from(["buy", "sell"]),
    qty=st.floats(min_value=1, max_value=1e6, allow_nan=False),
    other=st.fixed_dictionaries(
        {
            "code": st.text(alphabet=string.digits, min_size=6, max_size=6),
            "side": st.sampled_from(["buy", "sell", "short"]),
            "quantity": st.floats(allow_nan=False, allow_infinity=True),
        }
    ),
)
def test_property_a_trade_scope_never_covers_more(code, side, qty, other):
    s = standing_scope("execute_trade", {"code": code, "side": side, "quantity": qty}, live_trading=False)
    assert s is not None
    if s.covers("execute_trade", other):
        assert other["code"] == code and other["side"] == side and 0 < other["quantity"] <= qty


def test_a_scope_is_described_in_the_chats_language():
    """The card's "always allow would cover" line: no English words after /lang zh."""
    s = TRADE_SCOPE
    assert s is not None and s.describe() == "execute_trade buy 600519 ≤ 100 per order"
    assert s.describe("zh") == "execute_trade 买入 600519，每笔 ≤ 100"
    exact = standing_scope("manage_trader", {"action": "start", "trader": "t1"}, live_trading=False)
    assert exact is not None and exact.describe("zh") == "manage_trader，且参数完全相同"
    path = standing_scope("write_file", {"path": "notes/plan.md", "content": "a"}, live_trading=False)
    assert path is not None and path.describe("zh") == path.describe() == "write_file notes/plan.md"


def test_scope_round_trips_through_storage_form():
    s = TRADE_SCOPE
    assert s is not None and StandingScope.from_dict(s.to_dict()) == s


# ---- the gate applies standing approvals only within their limits ---------------------------------
def _gate(live: list[bool], hours: float = 24):
    from datetime import UTC, datetime, timedelta

    from agent.approval import ApprovalGate
    from agent.inmemory import InMemoryStore

    clock = FakeClock(datetime(2026, 12, 1, 9, 0, tzinfo=UTC))
    gate = ApprovalGate(
        InMemoryStore(), clock, standing_ttl=timedelta(hours=hours), live_trading=lambda: live[0]
    )
    return gate, clock


async def _ask(gate, args, who, n=[0]):  # noqa: B006  (a call counter)
    """Run the gate on one execute_trade call; returns the pending approval or None (it may run)."""
    from agent.approval import Suspend
    from agent.messages import ToolCallPart
    from agent.ports import TurnRecord
    from agent.tools.registry import ToolSpec

    n[0] += 1
    spec = ToolSpec("execute_trade", "", {}, requires_approval=True)
    call = ToolCallPart(id=f"c{n[0]}", name="execute_trade", arguments=args)
    try:
        await gate.check(spec, call, TurnRecord(id=f"t{n[0]}", session_id="s"), who)
    except Suspend as s:
        return s.approval
    return None


async def test_a_standing_trade_approval_is_limited_in_time_live_trading_and_requester():
    from datetime import timedelta

    import pytest as _pytest

    from agent.approval import Requester
    from agent.errors import ApprovalError

    live = [False]
    gate, clock = _gate(live, hours=48)  # asked for 48 h: capped at 24
    admin = Requester("u1", "tg:1", ("u1",))
    record = await _ask(gate, TRADE, admin)
    assert record is not None and not record.approvers == []
    await gate.decide(record.id, "u1", "always")
    (rule,) = await gate.store.list_standing("tg:1", clock.now())
    assert rule.expires_at - rule.created_at == timedelta(hours=24) and rule.granted_by == "u1"
    assert await _ask(gate, TRADE, admin) is None  # covered
    # a member of the same chat (not an approver) is not covered
    assert await _ask(gate, TRADE, Requester("u2", "tg:1", ("u1",))) is not None
    # live trading on: never applied, and never granted
    live[0] = True
    pending = await _ask(gate, TRADE, admin)
    assert pending is not None
    with _pytest.raises(ApprovalError):
        await gate.decide(pending.id, "u1", "always")
    live[0] = False
    # past its expiry it asks again
    clock.advance(hours=24, seconds=1)
    assert await _ask(gate, TRADE, admin) is not None


async def test_a_shorter_standing_ttl_is_honoured():

    from agent.approval import Requester

    gate, clock = _gate([False], hours=2)
    who = Requester("u1", "tg:1", ("u1",))
    record = await _ask(gate, TRADE, who)
    await gate.decide(record.id, "u1", "always")
    clock.advance(hours=2, seconds=1)
    assert await _ask(gate, TRADE, who) is not None
