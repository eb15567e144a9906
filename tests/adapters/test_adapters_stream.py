"""StreamingMessage: edit rate on an injected clock, splitting, final render, plain fallback."""

from __future__ import annotations

import asyncio
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.base import Button, ChatAdapter, ChatRef, DeliveryUncertain, SentMessage
from adapters.stream import StreamingMessage
from tests.fakes.clock import FakeClock
from tests.fakes.telegram_api import cant_parse


class RecordingAdapter(ChatAdapter):
    platform = "test"
    max_message_len = 300

    def __init__(self, clock: FakeClock):
        self.clock = clock
        self.ops: list[tuple[float, str, str, str]] = []  # (time, op, message id, text)
        self.texts: dict[str, str] = {}
        self.buttons: dict[str, object] = {}
        self._n = 0

    async def start(self, handler):  # pragma: no cover - not used
        pass

    async def stop(self):  # pragma: no cover
        pass

    async def send_text(self, chat, text, *, buttons=None, reply_to=None, format="markdown"):
        assert len(text) <= self.max_message_len
        self._n += 1
        mid = str(self._n)
        self.ops.append((self.clock.monotonic(), "send", mid, text))
        self.texts[mid], self.buttons[mid] = text, buttons
        return SentMessage(chat, mid)

    async def edit_text(self, msg, text, *, buttons=None, format="markdown"):
        assert len(text) <= self.max_message_len
        self.ops.append((self.clock.monotonic(), "edit", msg.message_id, text))
        self.texts[msg.message_id], self.buttons[msg.message_id] = text, buttons

    async def send_typing(self, chat):  # pragma: no cover
        pass

    async def send_image(self, chat, path, caption=""):  # pragma: no cover
        raise NotImplementedError

    async def set_commands(self, commands, *, translations=None):  # pragma: no cover
        pass


DM = ChatRef("test", "1")
GROUP = ChatRef("test", "-5", is_group=True)


async def _stream_words(stream: StreamingMessage, clock: FakeClock, words: int, dt: float) -> str:
    text = ""
    for i in range(words):
        delta = f"w{i} "
        text += delta
        await stream.append(delta)
        clock.advance(dt)
        await asyncio.sleep(0)
    return text


async def test_edits_are_rate_limited_per_chat_kind():
    for chat, interval in [(DM, 1.0), (GROUP, 3.0)]:
        clock = FakeClock(auto=False)
        ad = RecordingAdapter(clock)
        stream = StreamingMessage(ad, chat, clock=clock.monotonic, sleep=clock.sleep)
        assert stream.min_interval == interval
        text = await _stream_words(stream, clock, words=200, dt=0.05)  # 10 s of streaming
        clock.auto = True
        await stream.finish()
        times = stream.pushes
        assert len(times) >= 2
        assert all(b - a >= interval - 1e-9 for a, b in itertools.pairwise(times))
        assert "".join(ad.texts[m.message_id] for m in stream.messages) == text
        # one push per interval at most (a push may touch two messages when the text overflows)
        assert len(times) <= 10 / interval + 2
        assert len(ad.ops) <= 2 * len(times)


async def test_overflow_continues_in_new_messages_and_buttons_go_last():
    clock = FakeClock(auto=False)
    ad = RecordingAdapter(clock)
    stream = StreamingMessage(ad, DM, clock=clock.monotonic, sleep=clock.sleep, min_interval=0.5)
    paragraphs = [f"Paragraph {i}: " + "lorem ipsum " * 8 for i in range(12)]
    full = "\n\n".join(paragraphs)
    for p in paragraphs:
        await stream.append(p + "\n\n")
        clock.advance(0.3)
        await asyncio.sleep(0)
    clock.auto = True
    sent = await stream.finish(full, buttons=[[Button("OK", "ok1")]])
    assert len(sent) >= 3
    shown = [ad.texts[m.message_id] for m in sent]
    assert "".join(shown).replace("\n", "") == full.replace("\n", "")
    assert ad.buttons[sent[-1].message_id] is not None
    assert all(ad.buttons[m.message_id] is None for m in sent[:-1])


async def test_finish_without_text_sends_nothing():
    clock = FakeClock()
    ad = RecordingAdapter(clock)
    stream = StreamingMessage(ad, DM, clock=clock.monotonic, sleep=clock.sleep)
    assert await stream.finish() == []
    assert ad.ops == []


async def test_flush_shows_text_before_a_pause():
    clock = FakeClock()
    ad = RecordingAdapter(clock)
    stream = StreamingMessage(ad, DM, clock=clock.monotonic, sleep=clock.sleep)
    await stream.append("Looking up prices")
    await stream.flush()
    assert ad.texts["1"] == "Looking up prices"
    await stream.finish("Looking up prices… done.")
    assert ad.texts["1"] == "Looking up prices… done."


async def test_stream_on_telegram_falls_back_to_plain_when_formatting_rejected(make_tg, tg_api, recorder):
    ad = await make_tg(recorder)
    tg_api.chat(77)
    clock = FakeClock()
    chat = ChatRef("telegram", "77")
    stream = StreamingMessage(ad, chat, clock=clock.monotonic, sleep=clock.sleep)
    await stream.append("**Total**: 5 < 6")
    await stream.flush()
    tg_api.fail("editMessageText", cant_parse())
    final = await stream.finish("**Total**: 5 < 6 & done")
    assert len(final) == 1
    msg = tg_api.messages[(77, int(final[0].message_id))]
    assert msg["text"] == "Total: 5 < 6 & done"  # the plain resend after the parse error
    assert [c.params.get("parse_mode") for c in tg_api.calls_to("editMessageText")] == ["HTML", None]


class UncertainFirstSend(RecordingAdapter):
    """The first send lands but its answer never comes (DeliveryUncertain): no id is known."""

    async def send_text(self, chat, text, *, buttons=None, reply_to=None, format="markdown"):
        sent = await super().send_text(chat, text, buttons=buttons, reply_to=reply_to, format=format)
        if sent.message_id == "1":
            raise DeliveryUncertain("timed out")
        return sent


async def test_a_partial_first_part_of_uncertain_fate_is_not_repeated_silently():
    """The streamed first part timed out without an answer: no more partial sends follow it, and
    the final answer says clearly that it is the full one (the partial may show above it)."""
    clock = FakeClock(auto=False)
    ad = UncertainFirstSend(clock)
    stream = StreamingMessage(ad, DM, clock=clock.monotonic, sleep=clock.sleep, resend_note="(in full)")
    await _stream_words(stream, clock, words=60, dt=0.05)  # 3 s of streaming: several pushes due
    clock.auto = True
    sent = await stream.finish("the whole answer")
    sends = [text for _, op, _, text in ad.ops if op == "send"]
    assert len(sends) == 2, ad.ops  # the uncertain partial, then the final one only
    assert sends[1].startswith("(in full)") and sends[1].endswith("the whole answer")
    assert [ad.texts[m.message_id] for m in sent] == [sends[1]]


@settings(max_examples=60, deadline=None)
@given(
    words=st.lists(st.text(alphabet="abc xyz\n", min_size=1, max_size=40), min_size=1, max_size=40),
    note=st.sampled_from(["", "(in full)", "↩️ The full answer (an unfinished copy may show above):"]),
)
async def test_a_final_answer_after_an_uncertain_part_keeps_all_text_within_limits(words, note):
    """Whatever the text, the note-headed final answer stays within the platform limit (the fake
    asserts it) and shows the whole text once, after the uncertain part."""
    clock = FakeClock(auto=False)
    ad = UncertainFirstSend(clock)
    stream = StreamingMessage(ad, DM, clock=clock.monotonic, sleep=clock.sleep, resend_note=note)
    for w in words:
        await stream.append(w)
        clock.advance(0.5)
        await asyncio.sleep(0)
    clock.auto = True
    full = "".join(words)
    sent = await stream.finish(full)
    if not full.strip():
        return
    shown = "".join(ad.texts[m.message_id] for m in sent)
    assert stream._uncertain  # the first send was a partial one, and it timed out
    assert shown.startswith(note)
    shown = shown[len(note) :]
    assert "".join(shown.split()) == "".join(full.split())


async def test_a_message_shown_before_the_end_is_reported_once():
    """`on_sent` hears of each message a partial send put out (so a replica can keep where an
    answer not yet stored is shown); edits and the final send are not reported."""
    clock = FakeClock()
    ad = RecordingAdapter(clock)
    reported: list[list[str]] = []

    async def on_sent(sent: list[SentMessage]) -> None:
        reported.append([m.message_id for m in sent])

    stream = StreamingMessage(
        ad, DM, clock=clock.monotonic, sleep=clock.sleep, min_interval=0.5, on_sent=on_sent
    )
    await stream.append("Hello ")
    await stream.flush()
    await stream.append("world")
    await stream.flush()
    assert reported == [["1"]]  # sent once, then edited
    await stream.finish()
    assert reported == [["1"]]

    quiet = StreamingMessage(ad, DM, clock=clock.monotonic, sleep=clock.sleep, on_sent=on_sent)
    await quiet.append("all at once")
    await quiet.finish()  # the final send is stored with the turn already: nothing to keep
    assert reported == [["1"]]
