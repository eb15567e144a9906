"""The Telegram adapter against the fake Bot API (through PTB's request seam, and once over HTTP)."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import pytest

from adapters.base import (
    Button,
    ButtonPress,
    ChatRef,
    DeliveryError,
    InboundCommand,
    InboundMessage,
    MessageGone,
)
from adapters.commandspec import CommandSpec, Words
from adapters.telegram import TelegramAdapter, WebhookConfig
from tests.fakes.net import free_port
from tests.fakes.telegram_api import BOT_USER, FakeRequest, cant_parse, retry_after


async def test_text_in_reply_out(make_tg, tg_api, recorder):
    async def reply(ev):
        await ad.send_text(ev.chat, f"You said **{ev.text}** <ok>", reply_to=ev.message_id)

    recorder.on = reply
    ad = await make_tg(recorder)
    assert ad.me is not None and ad.me.username == BOT_USER["username"]
    tg_api.push_text(5, "hello & bye", language_code="zh-hans")
    await tg_api.wait_for(lambda: tg_api.texts(5))
    ev = recorder.events[0]
    assert isinstance(ev, InboundMessage)
    assert ev.text == "hello & bye" and ev.chat.key == "telegram:5" and not ev.chat.is_group
    assert ev.user.user_id == "1" and ev.user.language_code == "zh-hans" and ev.addressed
    assert ev.sent_at.tzinfo is not None
    msg = tg_api.sent(5)[0]
    assert msg["text"] == "You said hello & bye <ok>"
    assert msg["_parse_mode"] == "HTML"
    assert json.loads(msg["_link_preview_options"]) == {"is_disabled": True}
    assert msg["reply_to_message"]["message_id"] == int(ev.message_id)


async def test_command_parsing(make_tg, tg_api, recorder):
    await make_tg(recorder)
    tg_api.push_text(5, "/Model  claude-sonnet fast ")
    tg_api.push_text(-100200, f"/status@{BOT_USER['username']}", user_id=7)
    tg_api.push_text(-100200, "/status@some_other_bot", user_id=7)
    tg_api.push_text(-100200, "after", user_id=7)
    await tg_api.wait_for(lambda: len(recorder.events) == 3)
    a, b, c = recorder.events
    assert isinstance(a, InboundCommand) and a.name == "model" and a.args == "claude-sonnet fast"
    assert a.argv == ["claude-sonnet", "fast"]
    assert isinstance(b, InboundCommand) and b.name == "status" and b.args == "" and b.chat.is_group
    assert isinstance(c, InboundMessage) and c.text == "after"  # the other bot's command was skipped


async def test_group_addressing_flags(make_tg, tg_api, recorder):
    ad = await make_tg(recorder)
    tg_api.chat(-100300)
    card = await ad.send_text(ChatRef("telegram", "-100300", is_group=True), "card")
    tg_api.push_text(-100300, "just chatting", user_id=8)
    tg_api.push_text(-100300, f"@{BOT_USER['username']} what is 600519?", user_id=8)
    tg_api.push_text(-100300, "change the size to 5", user_id=8, reply_to=int(card.message_id))
    await tg_api.wait_for(lambda: len(recorder.events) == 3)
    chatting, mention, reply = recorder.events
    assert not chatting.addressed
    assert mention.addressed and mention.text == "what is 600519?"
    assert reply.addressed and reply.reply_to_bot and reply.reply_to_message_id == card.message_id


async def test_button_press_is_answered(make_tg, tg_api, recorder):
    async def on(ev):
        if isinstance(ev, ButtonPress) and ev.data == "ap:x1":
            await ad.answer_button(ev, "Approved", alert=False)
        if isinstance(ev, ButtonPress) and ev.data == "boom":
            raise RuntimeError("handler bug")

    recorder.on = on
    ad = await make_tg(recorder)
    tg_api.chat(5)
    sent = await ad.send_text(
        ChatRef("telegram", "5"), "Run tool?", buttons=[[Button("Allow", "ap:x1"), Button("Deny", "dn:x1")]]
    )
    markup = tg_api.messages[(5, int(sent.message_id))]["reply_markup"]
    assert [b["callback_data"] for b in markup["inline_keyboard"][0]] == ["ap:x1", "dn:x1"]
    mid = int(sent.message_id)
    tg_api.push_callback(5, mid, "ap:x1", user_id=1)
    tg_api.push_callback(5, mid, "dn:x1", user_id=2)  # handler doesn't answer: adapter answers silently
    tg_api.push_callback(5, mid, "boom")  # handler raises: still answered, adapter survives
    await tg_api.wait_for(lambda: len(tg_api.callback_answers) == 3)
    first = recorder.events[0]
    assert (
        isinstance(first, ButtonPress) and first.message_id == sent.message_id and first.user.user_id == "1"
    )
    answers = tg_api.callback_answers
    assert answers[0].get("text") == "Approved"
    assert "text" not in answers[1] and "text" not in answers[2]
    tg_api.push_text(5, "still alive")
    await tg_api.wait_for(lambda: any(isinstance(e, InboundMessage) for e in recorder.events))


async def test_flood_control_waits_retry_after_then_retries(make_tg, tg_api, recorder, fake_sleep):
    ad = await make_tg(recorder)
    tg_api.chat(5)
    tg_api.fail("sendMessage", retry_after(3), times=2)
    sent = await ad.send_text(ChatRef("telegram", "5"), "hi")
    assert tg_api.messages[(5, int(sent.message_id))]["text"] == "hi"
    assert fake_sleep.sleeps[-2:] == [pytest.approx(3.1), pytest.approx(3.1)]
    assert len(tg_api.calls_to("sendMessage")) == 3
    # beyond max_retries the caller gets a DeliveryError carrying retry_after
    tg_api.fail("sendMessage", retry_after(5), times=10)
    with pytest.raises(DeliveryError) as exc:
        await ad.send_text(ChatRef("telegram", "5"), "again")
    assert exc.value.retry_after == 5


async def test_parse_error_resends_plain(make_tg, tg_api, recorder):
    ad = await make_tg(recorder)
    tg_api.chat(5)
    tg_api.fail("sendMessage", cant_parse())
    sent = await ad.send_text(ChatRef("telegram", "5"), "**bold** and `code`")
    calls = tg_api.calls_to("sendMessage")
    assert [c.params.get("parse_mode") for c in calls] == ["HTML", None]
    assert tg_api.messages[(5, int(sent.message_id))]["text"] == "bold and code"


async def test_forum_topic_is_its_own_chat(make_tg, tg_api, recorder):
    async def reply(ev):
        await ad.send_text(ev.chat, "in topic")
        await ad.send_typing(ev.chat)

    recorder.on = reply
    ad = await make_tg(recorder)
    tg_api.push_text(-100500, "hi in topic", user_id=3, thread_id=7)
    tg_api.push_text(-100500, "hi in general", user_id=3, forum=True)
    # each reply sends a text, then a chat action: wait for both, not only the texts
    await tg_api.wait_for(lambda: len(tg_api.sent(-100500)) == 2 and len(tg_api.chat_actions) == 2)
    keys = {e.chat.key for e in recorder.events}
    assert keys == {"telegram:-100500:topic7", "telegram:-100500"}
    topic_reply = next(m for m in tg_api.sent(-100500) if m.get("message_thread_id"))
    assert topic_reply["message_thread_id"] == 7
    assert {a.get("message_thread_id") for a in tg_api.chat_actions} == {"7", None}


async def test_stale_backlog_is_dropped_with_a_notice(make_tg, tg_api, recorder, caplog):
    old = time.time() - 3 * 3600
    tg_api.push_text(5, "/approve abc", date=old)
    tg_api.push_text(5, "buy 100 shares", date=old)
    tg_api.push_text(5, "fresh message")
    caplog.set_level(logging.WARNING, logger="adapters.telegram")
    ad = await make_tg(recorder, max_backlog_age_s=600)
    await tg_api.wait_for(lambda: recorder.events)
    assert [e.text for e in recorder.events] == ["fresh message"]
    assert ad.dropped_stale == 2
    assert "dropped stale update" in caplog.text
    await tg_api.wait_for(lambda: tg_api.texts(5))
    assert "skipped 2 message" in tg_api.texts(5)[0]


async def test_bad_update_and_handler_errors_do_not_kill_the_adapter(make_tg, tg_api, recorder):
    async def on(ev):
        if ev.text == "crash":
            raise ValueError("boom")

    recorder.on = on
    await make_tg(recorder)
    tg_api.push_update({"message": {"message_id": "not-a-number", "chat": "garbage"}})  # malformed
    tg_api.push_text(5, "crash")
    tg_api.push_text(5, "after")
    await tg_api.wait_for(lambda: [e.text for e in recorder.events] == ["crash", "after"])
    # everything including the malformed update got confirmed: no redelivery loop
    await tg_api.wait_for(lambda: not tg_api.updates)


async def test_unsupported_content_gets_a_clear_reply(make_tg, tg_api, recorder):
    await make_tg(recorder)
    tg_api.push_sticker(5)
    tg_api.push_document(5, user_id=2, language_code="zh-CN")
    tg_api.push_sticker(-100600, user_id=9)  # not addressed in a group: silence
    await tg_api.wait_for(lambda: len(tg_api.texts(5)) == 2)
    assert "only read text" in tg_api.texts(5)[0]
    assert "文字" in tg_api.texts(5)[1]
    assert recorder.events == []
    assert tg_api.texts(-100600) == []


async def test_stop_does_not_acknowledge_unhandled_updates(make_tg, tg_api, recorder):
    gate = asyncio.Event()

    async def on(ev):
        if ev.text == "slow":
            await gate.wait()

    recorder.on = on
    ad = await make_tg(recorder, stop_grace_s=0.05, handler_timeout=30)
    tg_api.push_text(5, "quick")
    await tg_api.wait_for(lambda: len(recorder.events) == 1)
    slow_id = tg_api.push_text(5, "slow")
    await tg_api.wait_for(lambda: len(recorder.events) == 2)
    await ad.stop()
    assert tg_api.confirmed_offset <= slow_id  # "quick" confirmed, "slow" not
    assert [u["update_id"] for u in tg_api.updates] == [slow_id]
    gate.set()
    # a restart gets the unhandled update again
    again = []

    async def record(ev):
        again.append(ev)

    await make_tg(record)
    await tg_api.wait_for(lambda: again)
    assert again[0].text == "slow" and again[0].update_id == str(slow_id)


async def test_clean_stop_confirms_what_was_handled(make_tg, tg_api, recorder):
    ad = await make_tg(recorder)
    last = tg_api.push_text(5, "one")
    await tg_api.wait_for(lambda: recorder.events)
    await ad.stop()
    assert tg_api.confirmed_offset == last + 1
    assert tg_api.updates == []
    n = len(tg_api.calls_to("getUpdates"))
    await asyncio.sleep(0.1)  # absence: time for a wrong fetch after stop
    assert len(tg_api.calls_to("getUpdates")) == n  # no fetching after stop


async def test_long_text_is_split_with_buttons_on_last(make_tg, tg_api, recorder):
    ad = await make_tg(recorder)
    tg_api.chat(5)
    text = "\n\n".join(f"Paragraph {i} " + "x" * 900 for i in range(10))
    sent = await ad.send_text(ChatRef("telegram", "5"), text, buttons=[[Button("OK", "ok")]])
    msgs = tg_api.sent(5)
    assert len(msgs) >= 3 and len(sent.earlier_ids) == len(msgs) - 1
    assert all("reply_markup" not in m for m in msgs[:-1]) and "reply_markup" in msgs[-1]
    assert "".join(m["text"] for m in msgs).replace("\n", "") == text.replace("\n", "")


async def test_edit_text_cases(make_tg, tg_api, recorder):
    ad = await make_tg(recorder)
    tg_api.chat(5)
    chat = ChatRef("telegram", "5")
    card = await ad.send_text(chat, "Approve?", buttons=[[Button("Allow", "a1")]])
    await ad.edit_text(card, "Approved by **Ann**")
    m = tg_api.messages[(5, int(card.message_id))]
    assert m["text"] == "Approved by Ann" and "reply_markup" not in m
    await ad.edit_text(card, "Approved by **Ann**")  # "message is not modified" is not an error
    with pytest.raises(MessageGone):
        await ad.edit_text(card.__class__(chat, "999999"), "x")
    await ad.edit_text(card, "y" * 5000)  # over the limit: truncated with a marker
    assert tg_api.messages[(5, int(card.message_id))]["text"].endswith("…")


async def test_image_and_commands(make_tg, tg_api, recorder, tmp_path):
    ad = await make_tg(recorder)
    tg_api.chat(5)
    png = tmp_path / "chart.png"
    png.write_bytes(b"\x89PNG fake bytes")
    sent = await ad.send_image(ChatRef("telegram", "5"), png, caption="**600519** weekly")
    m = tg_api.messages[(5, int(sent.message_id))]
    assert m["caption"] == "600519 weekly" and m["photo"][0]["file_size"] == len(png.read_bytes())
    await ad.set_commands(
        [
            CommandSpec("new", Words("Start a new session", "开始新会话"), "session"),
            CommandSpec("status", Words("Show status", "查看状态"), "session"),
        ]
    )
    assert [c["command"] for c in tg_api.commands[""]] == ["new", "status"]
    assert tg_api.commands[""][1]["description"] == "Show status"
    assert tg_api.commands["zh"][0]["description"] == "开始新会话"
    assert tg_api.commands["zh"][1]["description"] == "查看状态"


async def test_token_never_logged(make_tg, tg_api, recorder, caplog):
    caplog.set_level(logging.DEBUG)
    await make_tg(recorder)
    logging.getLogger("telegram.ext.Updater").error(
        "url was https://api.telegram.org/bot%s/getMe", tg_api.token
    )
    try:
        raise RuntimeError(f"failed POST /bot{tg_api.token}/sendMessage")
    except RuntimeError:
        logging.getLogger("some.module").exception("oops")
    tg_api.push_text(5, "hi")
    await tg_api.wait_for(lambda: recorder.events)
    text = "\n".join(caplog.handler.format(r) for r in caplog.records)
    assert "oops" in text and "[REDACTED]" in text
    assert tg_api.token not in text


async def test_webhook_mode_checks_secret(tg_api, recorder):
    port = free_port()
    cfg = WebhookConfig(
        url=f"http://127.0.0.1:{port}/tg", secret_token="s3cret-Token_1", port=port, path="/tg"
    )
    ad = TelegramAdapter(
        tg_api.token, request=FakeRequest(tg_api), get_updates_request=FakeRequest(tg_api), webhook=cfg
    )
    await ad.start(recorder)
    try:
        assert tg_api.webhook["url"] == cfg.url and tg_api.webhook["secret_token"] == cfg.secret_token
        assert tg_api.webhook.get("drop_pending_updates") in (None, "False", "false")
        tg_api.push_text(5, "via webhook")
        assert await tg_api.deliver_webhook(secret="wrong") == [403]
        assert recorder.events == []
        assert await tg_api.deliver_webhook() == [200]
        assert recorder.events[0].text == "via webhook"
        assert tg_api.updates == []
    finally:
        await ad.stop()


async def test_end_to_end_over_http_via_api_base_url(tg_api, recorder, caplog):
    """The real HTTPXRequest and our base_url wiring, against the fake served on loopback."""
    caplog.set_level(logging.DEBUG)
    await tg_api.serve()
    ad = TelegramAdapter(tg_api.token, api_base_url=tg_api.base_url, poll_timeout=0.05)

    async def reply(ev):
        await ad.send_text(ev.chat, "pong **ok**", buttons=[[Button("Again", "again")]])

    recorder.on = reply
    try:
        await ad.start(recorder)
        tg_api.push_text(5, "/ping")
        await tg_api.wait_for(lambda: tg_api.texts(5), timeout=10)
        assert tg_api.texts(5) == ["pong ok"]
        mid = tg_api.sent(5)[0]["message_id"]
        tg_api.push_callback(5, mid, "again")
        await tg_api.wait_for(lambda: tg_api.callback_answers, timeout=10)
    finally:
        await ad.stop()
        await tg_api.close()
    assert isinstance(recorder.events[0], InboundCommand) and recorder.events[0].name == "ping"
    assert tg_api.token not in caplog.text


async def test_second_poller_conflict_is_reported_and_survived(make_tg, tg_api, recorder, fake_sleep, caplog):
    caplog.set_level(logging.ERROR, logger="adapters.telegram")
    conflict = (
        409,
        {"ok": False, "error_code": 409, "description": "Conflict: terminated by other getUpdates request"},
    )
    tg_api.fail("getUpdates", conflict, times=2)
    await make_tg(recorder)
    tg_api.push_text(5, "hi")
    await tg_api.wait_for(lambda: recorder.events)
    assert "another instance is polling" in caplog.text
    assert fake_sleep.sleeps and min(fake_sleep.sleeps) >= 10


async def test_rejected_token_is_a_config_error(tg_api, recorder):
    from agent.errors import ConfigError

    tg_api.fail("getMe", (401, {"ok": False, "error_code": 401, "description": "Unauthorized"}))
    ad = TelegramAdapter(tg_api.token, request=FakeRequest(tg_api), get_updates_request=FakeRequest(tg_api))
    with pytest.raises(ConfigError) as exc:
        await ad.start(recorder)
    assert "telegram.token" in str(exc.value) and tg_api.token not in str(exc.value)
