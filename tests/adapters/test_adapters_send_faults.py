"""Sends under transient faults, through the fake Bot API and the fake
Discord: 5xx, network errors and slow answers are retried within a budget without duplicates where
the platform lets us tell; only a final failure is raised."""

from __future__ import annotations

import asyncio

import pytest
from telegram.error import NetworkError, TimedOut

from adapters.base import ChatRef, DeliveryError
from adapters.stream import StreamingMessage
from tests.fakes.telegram_api import FakeRequest, _err

TG = ChatRef("telegram", "5")
DC = ChatRef("discord", "300")


def bad_gateway() -> tuple[int, dict]:
    return _err(502, "Bad Gateway")


# ---- Telegram --------------------------------------------------------------------------------


async def test_telegram_502_on_a_send_is_retried_once_it_did_not_land(make_tg, tg_api, recorder, fake_sleep):
    ad = await make_tg(recorder)
    tg_api.chat(5)
    tg_api.fail_when("sendMessage", bad_gateway())
    sent = await ad.send_text(TG, "the answer")
    assert tg_api.texts(5) == ["the answer"]
    assert sent.message_id == str(tg_api.sent(5)[0]["message_id"])
    assert fake_sleep.sleeps  # backed off before the retry


async def test_telegram_network_error_then_success(make_tg, tg_api, recorder):
    ad = await make_tg(recorder)
    tg_api.chat(5)
    tg_api.fail_when("sendMessage", NetworkError("httpx.ConnectError: connection refused"), times=2)
    await ad.send_text(TG, "hello")
    assert tg_api.texts(5) == ["hello"]


async def test_telegram_edit_retried_after_a_5xx_that_applied_it_is_not_an_error(make_tg, tg_api, recorder):
    ad = await make_tg(recorder)
    tg_api.chat(5)
    msg = await ad.send_text(TG, "one")
    tg_api.fail_after("editMessageText", bad_gateway())
    await ad.edit_text(msg, "two")  # the retry is "not modified": the edit did land
    assert tg_api.texts(5) == ["two"]


async def test_telegram_gives_up_within_the_budget_with_a_delivery_error(
    make_tg, tg_api, recorder, fake_sleep
):
    ad = await make_tg(recorder)
    tg_api.chat(5)
    tg_api.fail_when("sendMessage", bad_gateway(), times=100)
    with pytest.raises(DeliveryError):
        await ad.send_text(TG, "never")
    assert 2 <= len(tg_api.calls_to("sendMessage")) <= 6
    assert sum(fake_sleep.sleeps) <= ad.send_budget_s


async def test_telegram_a_slow_send_is_waited_for_not_duplicated(tg_api, fake_sleep):
    """A send that takes longer than the transport's default read timeout (a "25 s send"): the
    adapter waits for the answer instead of timing out and sending again."""
    from adapters.telegram import TelegramAdapter

    release = asyncio.Event()

    async def slow(_result):
        await release.wait()

    transport = FakeRequest(tg_api, read_timeout=0.05)  # like httpx's 5 s default, scaled down
    ad = TelegramAdapter(tg_api.token, request=transport, get_updates_request=FakeRequest(tg_api),
                         poll_timeout=0.05, sleep=fake_sleep.sleep, stop_grace_s=1.0)  # fmt: skip
    await ad.start(lambda e: asyncio.sleep(0))
    try:
        tg_api.chat(5)
        tg_api.delay_reply("sendMessage", slow)
        task = asyncio.create_task(ad.send_text(TG, "slow one"))
        await asyncio.sleep(0.2)  # four times the transport's read timeout
        release.set()
        await task
        assert tg_api.texts(5) == ["slow one"]
    finally:
        await ad.stop()


async def test_telegram_send_that_timed_out_after_landing_is_not_sent_again(make_tg, tg_api, recorder):
    """A timeout after the request went out is ambiguous and Telegram offers no way to ask: the
    send is not repeated (no duplicate); the caller gets a DeliveryError saying it may have landed."""
    ad = await make_tg(recorder)
    tg_api.chat(5)
    tg_api.fail_after("sendMessage", TimedOut("read timeout"))
    with pytest.raises(DeliveryError, match="may have"):
        await ad.send_text(TG, "maybe")
    assert tg_api.texts(5) == ["maybe"]


# ---- Discord ---------------------------------------------------------------------------------


async def test_discord_502_after_the_message_was_created_makes_no_duplicate(make_dc, dc_fake, recorder):
    ad = await make_dc(recorder)
    dc_fake.inject("POST", "/channels/300/messages", status=502, after=True)
    await ad.send_text(DC, "exactly once")
    assert [m["content"] for m in dc_fake.bot_messages("300")] == ["exactly once"]


async def test_discord_503_before_anything_is_retried(make_dc, dc_fake, recorder, fake_sleep):
    ad = await make_dc(recorder, sleep=fake_sleep.sleep)
    dc_fake.inject("POST", "/channels/300/messages", status=503, after=False, times=2)
    await ad.send_text(DC, "third time lucky")
    assert [m["content"] for m in dc_fake.bot_messages("300")] == ["third time lucky"]
    nonces = {c.json["nonce"] for c in dc_fake.calls_matching("POST", "/channels/300/messages")}
    assert len(nonces) == 1  # every attempt carries the same nonce: Discord deduplicates


async def test_discord_gives_up_with_a_delivery_error(make_dc, dc_fake, recorder, fake_sleep):
    ad = await make_dc(recorder, sleep=fake_sleep.sleep)
    dc_fake.inject("POST", "/channels/300/messages", status=503, after=False, times=100)
    with pytest.raises(DeliveryError):
        await ad.send_text(DC, "never")
    assert 2 <= len(dc_fake.calls_matching("POST", "/channels/300/messages")) <= 6


async def test_discord_stream_ending_while_its_first_post_is_in_flight_posts_once(make_dc, dc_fake, recorder):
    """Item 4: the stream ends ~0.8 s after it starts, while the delayed first send's POST is in
    flight; `finish()` must not cancel it and then post every part again."""
    ad = await make_dc(recorder)
    release = dc_fake.hold("POST", "/channels/300/messages")
    stream = StreamingMessage(ad, DC, first_delay=0.0)
    await stream.append("first part " + "x" * 1990 + "\n\nsecond part")
    await dc_fake.wait_for(lambda: dc_fake.bot_messages("300"))  # the first POST reached Discord
    finishing = asyncio.create_task(stream.finish())
    await asyncio.sleep(0.05)  # finish() reaches the held first part before it is released
    release.set()
    sent = await finishing
    contents = [m["content"] for m in dc_fake.bot_messages("300")]
    assert len(contents) == len(sent) == 2, contents
    assert contents[0].startswith("first part") and contents[1].endswith("second part")
    assert sum(c.startswith("first part") for c in contents) == 1


async def test_discord_image_is_retried_once_without_a_duplicate(
    make_dc, dc_fake, recorder, fake_sleep, tmp_path
):
    ad = await make_dc(recorder, sleep=fake_sleep.sleep)
    png = tmp_path / "chart.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"0" * 64)
    dc_fake.inject("POST", "/channels/300/messages", status=503, after=False)
    await ad.send_image(DC, png, "chart")
    msgs = dc_fake.bot_messages("300")
    assert len(msgs) == 1 and msgs[0]["attachments"]
