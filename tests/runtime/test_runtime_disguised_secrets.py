"""Disguised secrets: the configured key with a
zero-width space inside, base64-encoded (at any offset of a longer encoded text, standard or
URL-safe), base32, hex, reversed, letter-spaced, in full-width letters, or split across two
replies of one turn. Each is masked in what streams out, in the final answer and in storage —
and the chat sees it masked through the real Telegram adapter."""

from __future__ import annotations

import base64

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent import events as ev
from agent.approval import Requester
from agent.inmemory import InMemoryStore
from agent.redact import MASK, Redactor, StreamRedactor, alnum_view, disguises
from agent.runtime import AgentRuntime, TurnRequest
from agent.tools.registry import Toolset
from tests.fakes.runtime_kit import Script, call, collect, text

KEY = "sk-ant-api03-Zx9Qw7Lm2Np4Rt6Vy8Bc1Df3Gh5"


def fullwidth(s: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in s)


DISGUISES = {
    "zero-width space inside": lambda k: k[:9] + "\u200b" + k[9:20] + "\u2060" + k[20:],
    "base64": lambda k: base64.b64encode(f"key={k};".encode()).decode(),
    "base64 at offset 1": lambda k: base64.b64encode(f"x{k}".encode()).decode(),
    "base64 url-safe at offset 2": lambda k: base64.urlsafe_b64encode(f"xy{k}".encode()).decode(),
    "base32": lambda k: base64.b32encode(f"abc{k}".encode()).decode(),
    "hex": lambda k: k.encode().hex(),
    "reversed": lambda k: k[::-1],
    "letter-spaced": lambda k: " ".join(k),
    "split by line breaks": lambda k: k[:12] + "\n" + k[12:25] + "\r\n" + k[25:],
    "full-width": fullwidth,
}


def revealed(out: str, secret: str) -> bool:
    """Whether any disguise of `secret` can still be read in `out`."""
    view = alnum_view(out)
    return any(n in view for n in disguises(secret))


@pytest.mark.parametrize("name", list(DISGUISES))
def test_each_disguise_is_masked(name):
    disguised = DISGUISES[name](KEY)
    out = Redactor([KEY]).text(f"here it is: {disguised} — keep it safe")
    assert MASK in out and not revealed(out, KEY), out
    assert out.startswith("here it is: ") and out.endswith(" — keep it safe")


def test_ordinary_text_is_left_alone():
    r = Redactor([KEY])
    prose = "600519 贵州茅台 closed at 1,480.55 as of 2025-09-03 (459 days old); RSI 41, ATR 28.6."
    assert r.text(prose) == prose
    assert r.text(base64.b64encode(b"nothing secret in here at all").decode()).count(MASK) == 0


_secret = st.text(
    alphabet="ABCDEFGHJKLMNPQRSTUVWXYZabcdefghjkmnpqrstuvwxyz0123456789_-", min_size=16, max_size=48
)
_prose = st.text(alphabet=" abcdefgh.,:\n你好价", max_size=30)


@settings(max_examples=300, deadline=None)
@given(
    secret=_secret,
    name=st.sampled_from(list(DISGUISES)),
    before=_prose,
    after=_prose,
    pad=st.text(alphabet="xyz01", max_size=5),
)
def test_property_no_disguise_survives(secret, name, before, after, pad):
    """Any secret, any disguise, embedded anywhere (and behind 0–5 bytes of other data inside an
    encoding): what comes out reveals it in no disguise."""
    disguised = DISGUISES[name](secret)
    if name.startswith("base64") or name == "base32":  # any alignment inside the encoded text
        encode = base64.b32encode if name == "base32" else base64.b64encode
        disguised = encode(f"{pad}{secret}{pad}".encode()).decode()
    out = Redactor([secret]).text(before + disguised + after)
    assert not revealed(out, secret)


# ---- through the loop: streamed, stored, and split across two replies of one turn --------------
tools = Toolset("disguise")


@tools.tool
def lookup() -> str:
    """A harmless tool between the two halves of the answer."""
    return "ok"


def _runtime(store: InMemoryStore, script: Script) -> AgentRuntime:
    return AgentRuntime(model_for=lambda _id: script, tools=tools, store=store, redactor=Redactor([KEY]))


def _req(t: str) -> TurnRequest:
    return TurnRequest(session_id="s1", text=t, who=Requester("u1", "tg:1", ("u1",)))


def _stored(store: InMemoryStore) -> str:
    return "\n".join(m.text for m in store.messages.get("s1", []))


@pytest.mark.parametrize("name", ["base64", "zero-width space inside", "reversed", "letter-spaced"])
async def test_a_disguised_key_streamed_in_pieces_is_masked_shown_and_stored(name):
    answer = f"Decoded for you: {DISGUISES[name](KEY)} — done."
    chunks = [text(answer[i : i + 7]) for i in range(0, len(answer), 7)]
    store = InMemoryStore()
    events = await collect(_runtime(store, Script([chunks])).run(_req("show me the key")))
    shown = "".join(e.text for e in events if isinstance(e, ev.TextDelta))
    assert not revealed(shown, KEY) and not revealed(_stored(store), KEY)
    assert shown.startswith("Decoded for you: ") and shown.endswith("— done.")


async def test_a_key_split_across_two_replies_of_one_turn_is_masked():
    """The model says the first half, calls a tool, then says the second half: neither the chat
    nor the store ever holds the two halves."""
    first, second = KEY[:17], KEY[17:]
    script = Script([[text(f"Part one: {first}"), call("lookup", {})], [text(f"{second} — that is all.")]])
    store = InMemoryStore()
    events = await collect(_runtime(store, script).run(_req("key please")))
    shown = "".join(e.text for e in events if isinstance(e, ev.TextDelta))
    assert KEY not in shown and first not in shown, shown
    assert shown.startswith("Part one: ") and shown.endswith("— that is all.")
    stored = _stored(store)
    assert first not in stored and second not in stored and KEY not in stored


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret=_secret, cut=st.integers(4, 40))
async def test_property_a_split_across_rounds_never_shows(secret, cut):
    cut = min(cut, len(secret) - 4)
    script = Script([[text("a: " + secret[:cut]), call("lookup", {})], [text(secret[cut:] + " end")]])
    store = InMemoryStore()
    rt = AgentRuntime(model_for=lambda _id: script, tools=tools, store=store, redactor=Redactor([secret]))
    shown = "".join(e.text for e in await collect(rt.run(_req("go"))) if isinstance(e, ev.TextDelta))
    assert secret not in shown and secret[:cut] not in shown


@pytest.mark.parametrize(
    "name",
    ["base64", "base64 url-safe at offset 2", "hex", "reversed", "letter-spaced", "zero-width space inside"],
)
async def test_a_disguised_key_split_across_two_replies_of_one_turn_is_masked(name):
    """Disguised secrets, split around a tool call: the first reply ends with the first half of
    the disguise, the second begins with the rest. Neither the chat nor the store may hold a
    half that, joined with the other, reads as the key."""
    disguised = DISGUISES[name](KEY)
    cut = len(disguised) // 2
    script = Script(
        [[text(f"Part one: {disguised[:cut]}"), call("lookup", {})], [text(f"{disguised[cut:]} — end.")]]
    )
    store = InMemoryStore()
    events = await collect(_runtime(store, script).run(_req("encode the key")))
    shown = "".join(e.text for e in events if isinstance(e, ev.TextDelta))
    assert shown.startswith("Part one: ") and shown.endswith("— end.")
    assert not revealed(shown, KEY), shown
    # the first half alone is not shown before the tool runs, nor stored
    assert alnum_view(disguised[:cut])[-10:] not in alnum_view(shown)
    stored = _stored(store)
    assert not revealed(stored, KEY) and alnum_view(disguised[:cut])[-10:] not in alnum_view(stored), stored


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret=_secret, name=st.sampled_from(list(DISGUISES)), frac=st.floats(0.2, 0.8))
async def test_property_a_disguise_split_across_rounds_never_shows(secret, name, frac):
    """Any secret, any disguise, cut anywhere in its middle around a tool call: what the chat is
    shown and what is stored, read whole, reveals it in no disguise."""
    disguised = DISGUISES[name](secret)
    cut = max(1, int(len(disguised) * frac))
    script = Script([[text("a: " + disguised[:cut]), call("lookup", {})], [text(disguised[cut:] + " end")]])
    store = InMemoryStore()
    rt = AgentRuntime(model_for=lambda _id: script, tools=tools, store=store, redactor=Redactor([secret]))
    shown = "".join(e.text for e in await collect(rt.run(_req("go"))) if isinstance(e, ev.TextDelta))
    assert not revealed(shown, secret)
    assert not revealed(_stored(store), secret)


@settings(max_examples=300, deadline=None)
@given(
    secret=_secret,
    name=st.sampled_from(list(DISGUISES)),
    brk=st.integers(1, 60),
    sep=st.sampled_from(["\n", "\r\n", " ", "\u200b"]),
    step=st.integers(1, 9),
    before=_prose,
    after=_prose,
)
def test_property_a_streamed_disguise_broken_anywhere_never_shows(
    secret, name, brk, sep, step, before, after
):
    """Disguised secrets in a stream: the disguise is broken by a line break, a space or a
    zero-width character after any of its characters (the first one too) and streamed in pieces
    of any size; what is shown reveals it in no disguise."""
    disguised = DISGUISES[name](secret)
    at = min(brk, len(disguised) - 1)
    streamed = before + " " + disguised[:at] + sep + disguised[at:] + " " + after
    redactor = StreamRedactor(Redactor([secret]))
    shown = "".join(redactor.feed(streamed[i : i + step]) for i in range(0, len(streamed), step))
    shown += redactor.flush()
    assert not revealed(shown, secret), shown


def test_a_key_broken_after_its_first_character_is_masked_in_a_stream():
    """The line-split disguise at its most extreme: one character, a line break, the rest."""
    streamed = f"here: {KEY[0]}\n{KEY[1:]} ok"
    redactor = StreamRedactor(Redactor([KEY]))
    shown = "".join(redactor.feed(streamed[i : i + 3]) for i in range(0, len(streamed), 3)) + redactor.flush()
    assert not revealed(shown, KEY) and shown.endswith(" ok"), shown


_kept: list[str] = []


@tools.tool
def remember(text: str) -> str:
    """Stands for anything a tool stores (a memory, a file): it records what it was given."""
    _kept.append(text)
    return "saved"


@pytest.mark.parametrize("name", ["base64", "reversed", "letter-spaced", "zero-width space inside", "hex"])
async def test_a_disguised_key_in_tool_arguments_is_masked_before_anything_stores_it(name):
    """Stored text gets the same treatment: a tool (memory, a file) never receives a disguised key
    in its arguments, and the stored call shows none either."""
    _kept.clear()
    script = Script([[call("remember", {"text": f"the key is {DISGUISES[name](KEY)} ok"})], [text("Saved.")]])
    store = InMemoryStore()
    await collect(_runtime(store, script).run(_req("remember my key")))
    assert _kept and all(not revealed(k, KEY) for k in _kept), _kept
    stored_calls = [c.arguments for m in store.messages.get("s1", []) for c in m.tool_calls]
    assert stored_calls and not revealed(str(stored_calls), KEY)


@pytest.mark.parametrize(
    "said", ["Let me check the prices", "Checking 600519 now", "好的，我查一下", "Looking it up:"]
)
async def test_ordinary_text_before_a_tool_call_is_shown_whole_before_it(said):
    """Holding back the end of a round is for what may begin a key: an ordinary ending is shown
    before the tool runs, and nothing of it moves into the next reply."""
    script = Script([[text(said), call("lookup", {})], [text("Done.")]])
    events = await collect(_runtime(InMemoryStore(), script).run(_req("go")))
    before: list[str] = []
    for e in events:
        if isinstance(e, ev.ToolCalls):
            break
        if isinstance(e, ev.TextDelta):
            before.append(e.text)
    assert "".join(before) == said
    after = "".join(
        e.text
        for e in events[events.index(next(e for e in events if isinstance(e, ev.ToolCalls))) :]
        if isinstance(e, ev.TextDelta)
    )
    assert after == "Done."
