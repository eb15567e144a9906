"""StreamRedactor properties: a secret — a configured value or a
recognisable key shape — embedded anywhere in a streamed answer, cut at arbitrary chunk
boundaries, never shows, whole or in telling pieces, in any interim state of the stream."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.redact import Redactor, StreamRedactor

# prose never contains upper-case letters or digits, so any 6 such characters in a row that show
# up in the output can only have come from the secret
_words = st.sampled_from(
    [
        *"abc xyz,.;!?\n\t",
        "你好",
        "支撑位",
        "。",
        "，",
        "api_key",
        " token ",
        "key: ",
        "Bearer ",
        "密钥是",
        '"',
        "=",
    ]
)
prose = st.lists(_words, max_size=25).map("".join)
configured = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ0123456789_-", min_size=8, max_size=48)
body = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ0123456789", min_size=20, max_size=40)
shaped = st.one_of(
    body.map(lambda b: "sk-" + b),
    body.map(lambda b: "sk-ant-api03-" + b),
    body.map(lambda b: "sk-proj-" + b),
    # Telegram bot tokens: digits, a colon, 30+ characters (real ones have 35)
    st.tuples(
        st.integers(100_000, 9_999_999_999),
        st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ0123456789_-", min_size=30, max_size=40),
    ).map(lambda t: f"{t[0]}:{t[1]}"),
)


def _stream(redactor: Redactor, text: str, cuts: list[int]) -> list[str]:
    """Every state the chat would show: the joined pieces after each chunk, then after flush."""
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    s = StreamRedactor(redactor)
    shown, states = "", []
    for a, b in itertools.pairwise(points):
        shown += s.feed(text[a:b])
        states.append(shown)
    shown += s.flush()
    states.append(shown)
    return states


def _pieces(secret: str, n: int) -> list[str]:
    return [secret[i : i + n] for i in range(len(secret) - n + 1)]


@settings(max_examples=400, deadline=None)
@given(before=prose, secret=configured, after=prose, cuts=st.lists(st.integers(0, 400), max_size=40))
def test_c2_configured_secret_never_shows_in_any_stream_state(before, secret, after, cuts):
    redactor = Redactor([secret])
    for state in _stream(redactor, before + secret + after, cuts):
        for piece in _pieces(secret, 6):
            assert piece not in state, (piece, state)


@settings(max_examples=400, deadline=None)
@given(
    before=prose,
    sep=st.sampled_from([" ", "\n", "是", "：", ":", "=", '"', "(", ""]),
    key=shaped,
    after=prose,
    cuts=st.lists(st.integers(0, 400), max_size=40),
)
def test_c2_key_shapes_never_show_in_any_stream_state(before, sep, key, after, cuts):
    """No configured value at all: the shape alone (sk-…, a bot token) is masked, also glued to
    CJK text ("密钥是sk-…") where a regex word boundary would not fire. (A shape glued to a
    preceding ASCII letter or digit is a different word — "task-…" — and is left alone.)"""
    if sep == "" and before[-1:].isascii() and before[-1:].isalnum():
        sep = " "
    states = _stream(Redactor(), before + sep + key + after, cuts)
    secret_part = key.split(":", 1)[1] if ":" in key and not key.startswith("sk-") else key[-20:]
    for state in states:
        for piece in _pieces(secret_part, 8):
            assert piece not in state, (piece, state)


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(st.one_of(prose, configured), max_size=8),
    secret=configured,
    cuts=st.lists(st.integers(0, 600), max_size=60),
)
def test_c2_stream_shows_the_redacted_text_and_nothing_else(parts, secret, cuts):
    """What the stream shows in the end is the redacted whole; earlier states are prefixes of it
    (an edit never has to take text back)."""
    text = secret.join(parts) if parts else secret
    redactor = Redactor([secret])
    states = _stream(redactor, text, cuts)
    assert states[-1] == redactor.text(text)
    for a, b in itertools.pairwise(states):
        assert b.startswith(a)


kv_words = st.sampled_from(
    ["api_key=", "Authorization: Bearer ", "password: ", '"token": "', "?token=", "secret=", "bearer ", " "]
)


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(st.one_of(prose, configured, shaped, kv_words), max_size=10), secret=configured)
def test_a_remembered_redaction_is_the_scanned_one(parts, secret):
    """The Redactor remembers what it made of a text object: asked again, with that object or with
    what it returned, it answers exactly what scanning would (masking twice may mask more, when a
    configured value overlaps a mask's edge, so a result is not assumed to be final)."""
    redactor = Redactor([secret])
    text = "".join(parts) + secret
    once = Redactor([secret])._scan(text)
    twice = Redactor([secret])._scan(once)
    assert redactor.text(text) == once
    scans = redactor.scans
    assert redactor.text(text) == once
    assert redactor.scans == scans  # answered from memory
    assert redactor.text(redactor.text(text)) == twice


def test_remembered_texts_are_forgotten_when_a_secret_is_added():
    redactor = Redactor()
    text = "the new token is abcdef-123456-zzz"
    assert redactor.text(text) == text
    redactor.add_secrets(["abcdef-123456-zzz"])
    assert redactor.text(text) == "the new token is ***"


def test_memory_of_texts_is_bounded():
    from agent import redact

    redactor = Redactor(["a-secret-value"])
    texts = [f"text number {i} " * 50 for i in range(redact.MEMO_ENTRIES * 2)]
    for t in texts:
        redactor.text(t)
    assert len(redactor._memo) <= redact.MEMO_ENTRIES
    huge = "x" * (redact.MEMO_MAX_CHARS + 1)
    redactor.text(huge)
    assert id(huge) not in redactor._memo  # too long to keep
