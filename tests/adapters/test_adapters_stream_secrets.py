"""Disguised secrets across the cut of a long streamed answer: the chat adapter's
redactor is the last wall before a chat, and a secret that straddles the cut between two
Telegram messages must not pass as two harmless halves — every message sent and every edit is
checked, through the fake Bot API."""

from __future__ import annotations

import base64

import pytest

from adapters.base import ChatRef
from adapters.stream import StreamingMessage
from agent.redact import Redactor, alnum_view, disguises

KEY = "sk-ant-api03-Zx9Qw7Lm2Np4Rt6Vy8Bc1Df3Gh5"
CHAT = ChatRef("telegram", "5")


def _everything_sent(api) -> str:
    return "\n".join([c.params.get("text", "") for c in api.calls if "text" in c.params])


def _revealed(text: str) -> bool:
    view = alnum_view(text)
    return KEY in text or any(n in view for n in disguises(KEY))


# Cut points: the stream splits at the platform limit (4096 less a margin), so each body puts
# the secret's middle right around character 4032.
BODIES = {
    "plain key in one long word": "a" * 4020 + KEY + "b" * 80,
    "letter-spaced key across the cut": "word " * 800 + "x" * 5 + " ".join(KEY) + " end",
    "base64 across the cut": "c" * 4000 + base64.b64encode(f"key={KEY};".encode()).decode() + "d" * 50,
    "key split by a line break at the cut": "line\n" * 803 + KEY[:12] + "\n" + KEY[12:] + "\nend",
}


@pytest.mark.parametrize("name", list(BODIES))
async def test_a_secret_across_the_cut_of_a_long_answer_never_reaches_telegram(
    name, make_tg, tg_api, recorder
):
    ad = await make_tg(recorder)
    tg_api.chat(5)
    ad.outbound = Redactor([KEY]).text
    stream = StreamingMessage(ad, CHAT, min_interval=0.0)
    body = BODIES[name] + "\nand more after it" * 40
    for i in range(0, len(body), 500):  # interim edits too
        await stream.append(body[i : i + 500])
        await stream.flush()
    sent = await stream.finish()
    assert len(sent) >= 2  # it was cut
    assert not _revealed(_everything_sent(tg_api))
    for text in tg_api.texts(5):
        assert not _revealed(text), text
