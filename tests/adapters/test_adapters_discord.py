"""The Discord adapter against the fake REST + gateway (real discord.py client, real websocket)."""

from __future__ import annotations

import discord
import pytest

from adapters.base import (
    Button,
    ButtonPress,
    ChatRef,
    DeliveryError,
    InboundCommand,
    InboundMessage,
    MessageGone,
    SentMessage,
)
from adapters.breaker import BudgetExhausted, InvalidRequestBudget
from adapters.commandspec import CommandSpec, Words
from adapters.discord import DiscordAdapter, command_payload
from tests.fakes.discord_fake import APP_ID, BOT


async def test_login_identify_ready(make_dc, dc_fake, recorder):
    ad = await make_dc(recorder)
    assert ad.me is not None and ad.me.user_id == BOT["id"]
    assert [c.path for c in dc_fake.calls[:2]] == ["/users/@me", "/oauth2/applications/@me"]
    intents = discord.Intents._from_value(dc_fake.identifies[0]["intents"])
    assert intents.dm_messages and intents.guild_messages and not intents.message_content


async def test_dm_message_reaches_handler_and_reply_is_safe(make_dc, dc_fake, recorder):
    async def reply(ev):
        await ad.send_text(ev.chat, "Hi @everyone, **done** https://example.com", reply_to=ev.message_id)

    recorder.on = reply
    ad = await make_dc(recorder)
    await dc_fake.push_dm(300, 42, "hello bot")
    await dc_fake.wait_for(lambda: dc_fake.bot_messages(300))
    ev = recorder.events[0]
    assert isinstance(ev, InboundMessage) and ev.text == "hello bot" and ev.addressed
    assert ev.chat == ChatRef("discord", "300") and ev.user.user_id == "42"
    post = dc_fake.calls_matching("POST", "/channels/300/messages")[0].json
    assert post["content"] == "Hi @\u200beveryone, **done** https://example.com"
    assert post["allowed_mentions"]["parse"] == []
    assert post["flags"] & 4  # SUPPRESS_EMBEDS: no link preview
    assert post["message_reference"]["message_id"] == int(ev.message_id)


async def test_guild_messages_only_when_addressed(make_dc, dc_fake, recorder):
    await make_dc(recorder)
    await dc_fake.push_guild_message(500, 501, 43, "chatter among humans")
    await dc_fake.push_guild_message(500, 501, 43, "what about 600519?", mention_bot=True)
    await dc_fake.wait_for(lambda: recorder.events)
    assert len(recorder.events) == 1
    ev = recorder.events[0]
    assert ev.text == "what about 600519?" and ev.chat.is_group and ev.chat.key == "discord:501"


async def test_slash_command_is_deferred_then_followed_up(make_dc, dc_fake, recorder):
    async def on(ev):
        assert dc_fake.callbacks and dc_fake.callbacks[0]["type"] == 5  # acknowledged before the work
        await ad.send_text(ev.chat, "**Model**: test-model")
        await ad.send_text(ev.chat, "second message goes to the channel")

    recorder.on = on
    ad = await make_dc(recorder)
    await dc_fake.push_slash("model", "claude fast", user_id=42, channel_id=300, locale="zh-CN")
    await dc_fake.wait_for(lambda: len(dc_fake.bot_messages(300)) == 2)
    ev = recorder.events[0]
    assert isinstance(ev, InboundCommand) and ev.name == "model" and ev.args == "claude fast"
    assert ev.user.language_code == "zh-CN"
    assert dc_fake.followups[0]["message"]["content"] == "**Model**: test-model"
    assert len(dc_fake.calls_matching("POST", "/channels/300/messages")) == 1
    # the followup message can be edited (through the interaction webhook while the token lives)
    first = SentMessage(ev.chat, dc_fake.followups[0]["message"]["id"])
    await ad.edit_text(first, "edited")
    assert dc_fake.calls_matching("PATCH", f"/webhooks/{APP_ID}/")
    assert dc_fake.followups[0]["message"]["content"] == "edited"


async def test_unanswered_slash_command_placeholder_is_removed(make_dc, dc_fake, recorder, fake_sleep):
    await make_dc(recorder, sleep=fake_sleep.sleep, interaction_grace_s=600)
    await dc_fake.push_slash("new", user_id=42, channel_id=300)
    await dc_fake.wait_for(lambda: dc_fake.calls_matching("DELETE", "/messages/@original"))
    assert 600 in fake_sleep.sleeps


async def test_button_survives_restart(make_dc, dc_fake, recorder):
    first = await make_dc(recorder)
    card = await first.send_text(
        ChatRef("discord", "300"),
        "Run `buy`?",
        buttons=[[Button("Allow", "ap7Kq", "success"), Button("Deny", "dn7Kq", "danger")]],
    )
    components = dc_fake.bot_messages(300)[0]["components"][0]["components"]
    assert [c["custom_id"] for c in components] == ["tb:ap7Kq", "tb:dn7Kq"]
    await first.stop()

    async def on(ev):
        if isinstance(ev, ButtonPress):
            await second.answer_button(ev, "Approved ✓")
            await second.edit_text(SentMessage(ev.chat, ev.message_id), "Approved by Alice")

    recorder.on = on
    second = await make_dc(recorder)  # a new client: nothing registered in memory
    await dc_fake.push_button("tb:ap7Kq", message_id=card.message_id, user_id=42, channel_id=300)
    await dc_fake.push_button("someone-elses:button", message_id=card.message_id, channel_id=300)
    await dc_fake.wait_for(lambda: dc_fake.followups)
    press = recorder.events[0]
    assert isinstance(press, ButtonPress) and press.data == "ap7Kq" and press.message_id == card.message_id
    assert [c["type"] for c in dc_fake.callbacks] == [6]  # deferred update; the foreign button ignored
    assert dc_fake.followups[0]["message"]["flags"] & 64  # ephemeral toast
    await dc_fake.wait_for(lambda: dc_fake.bot_messages(300)[0]["content"] == "Approved by Alice")
    assert dc_fake.bot_messages(300)[0]["components"] == []
    assert len(recorder.events) == 1


async def test_command_sync_only_when_changed(make_dc, dc_fake, recorder):
    cmds = [
        CommandSpec("new", Words("Start a new session", "开始新会话"), "session"),
        CommandSpec("status", Words("Show status", "查看状态"), "session"),
    ]
    a = await make_dc(recorder)
    await a.set_commands(cmds)
    assert len(dc_fake.command_syncs) == 1
    payload = dc_fake.command_syncs[0]["payload"]
    assert payload == command_payload(cmds)
    assert payload[0]["description_localizations"] == {"zh-CN": "开始新会话"}  # no Simplified under zh-TW
    assert dc_fake.command_syncs[0]["path"] == f"/applications/{APP_ID}/commands"
    await a.stop()
    b = await make_dc(recorder)  # restart: same command set → no PUT
    await b.set_commands(cmds)
    assert len(dc_fake.command_syncs) == 1 and b.synced == 0
    await b.set_commands([*cmds, CommandSpec("cancel", Words("Stop the running turn", "停止"), "session")])
    assert len(dc_fake.command_syncs) == 2


async def test_text_commands_and_errors_do_not_kill(make_dc, dc_fake, recorder):
    async def on(ev):
        if getattr(ev, "text", "") == "crash":
            raise RuntimeError("bug")

    recorder.on = on
    ad = await make_dc(recorder)
    await ad.set_commands([CommandSpec("approve", Words("Approve", "批准"), "approvals")])
    await dc_fake.push_dm(300, 42, "crash")
    await dc_fake.push_dm(300, 42, "/approve ab12")
    await dc_fake.push_dm(300, 42, "/notacommand x")
    await dc_fake.wait_for(lambda: len(recorder.events) == 3)
    cmd = recorder.events[1]
    assert isinstance(cmd, InboundCommand) and cmd.name == "approve" and cmd.args == "ab12"
    assert isinstance(recorder.events[2], InboundMessage)


async def test_long_text_split_and_edit_errors(make_dc, dc_fake, recorder):
    ad = await make_dc(recorder)
    chat = ChatRef("discord", "300")
    text = "\n\n".join(f"Section {i}\n" + "data " * 150 for i in range(7))
    sent = await ad.send_text(chat, text)
    msgs = dc_fake.bot_messages(300)
    assert len(msgs) >= 3 and all(len(m["content"]) <= 2000 for m in msgs)
    assert sent.message_id == msgs[-1]["id"] and len(sent.earlier_ids) == len(msgs) - 1
    with pytest.raises(MessageGone):
        await ad.edit_text(SentMessage(chat, "123456789012345678"), "x")


async def test_typing_and_image(make_dc, dc_fake, recorder, tmp_path):
    ad = await make_dc(recorder)
    chat = ChatRef("discord", "300")
    await ad.send_typing(chat)
    assert dc_fake.calls_matching("POST", "/channels/300/typing")
    png = tmp_path / "c.png"
    png.write_bytes(b"\x89PNG")
    await ad.send_image(chat, png, caption="chart @here")
    call = dc_fake.calls_matching("POST", "/channels/300/messages")[-1]
    assert call.files == ["c.png"] and call.json["content"] == "chart @\u200bhere"


def test_adapter_requires_token():
    with pytest.raises(ValueError):
        DiscordAdapter("", kv_get=dict().get, kv_set=lambda k, v: None)


async def test_attachment_only_dm_gets_a_clear_reply(make_dc, dc_fake, recorder):
    await make_dc(recorder)
    att = {"id": "1", "filename": "a.zip", "size": 10**8, "url": "http://x/a", "proxy_url": "http://x/a"}
    await dc_fake.push_dm(300, 42, "", attachments=[att])
    await dc_fake.wait_for(lambda: dc_fake.bot_messages(300))
    assert "only read text" in dc_fake.bot_messages(300)[0]["content"]
    assert recorder.events == []


async def test_rate_limited_send_is_retried_by_discord_py(make_dc, dc_fake, recorder):
    ad = await make_dc(recorder)
    dc_fake.fail_next[("POST", "/channels/300/messages")] = [
        (429, {"message": "You are being rate limited.", "retry_after": 0.01, "global": False})
    ]
    sent = await ad.send_text(ChatRef("discord", "300"), "after the wait")
    assert len(dc_fake.calls_matching("POST", "/channels/300/messages")) == 2
    assert dc_fake.bot_messages(300)[-1]["id"] == sent.message_id


async def test_rejected_token_is_a_config_error(dc_fake, kv, recorder):
    from agent.errors import ConfigError

    dc_fake.fail_next[("GET", "/users/@me")] = [(401, {"message": "401: Unauthorized", "code": 0})]
    ad = DiscordAdapter(
        "bad-token-123", kv_get=kv.aget, kv_set=kv.aset, ready_timeout=5, connector=dc_fake.connector()
    )
    with pytest.raises(ConfigError):
        await ad.start(recorder)
    await ad.stop()


async def test_with_content_intent_unaddressed_server_messages_are_forwarded_as_such(
    make_dc, dc_fake, recorder
):
    await make_dc(recorder, message_content_intent=True)
    assert discord.Intents._from_value(dc_fake.identifies[0]["intents"]).message_content
    await dc_fake.push_guild_message(500, 501, 43, "yes")
    await dc_fake.push_guild_message(500, 501, 43, "/status")  # not addressed: not a command for us
    await dc_fake.wait_for(lambda: len(recorder.events) == 2)
    assert all(isinstance(e, InboundMessage) and not e.addressed for e in recorder.events)


async def test_disallowed_content_intent_is_a_config_error(dc_fake, kv, recorder):
    from agent.errors import ConfigError

    dc_fake.reject_identify_with = 4014
    ad = DiscordAdapter(
        "tok-123456",
        kv_get=kv.aget,
        kv_set=kv.aset,
        message_content_intent=True,
        ready_timeout=5,
        guild_ready_timeout=0.05,
        connector=dc_fake.connector(),
    )
    with pytest.raises(ConfigError) as exc:
        await ad.start(recorder)
    assert "Message Content Intent" in str(exc.value)


async def test_each_adapter_reaches_its_own_server_and_discord_py_is_left_as_it_was(kv, recorder):
    """Through discord.py's per-client `connector`, two adapters in one process reach two
    servers, and discord.py's defaults (Discord itself) stay unchanged for every other client."""
    from tests.fakes.discord_fake import FakeDiscord

    base, gateway = discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    fakes = [FakeDiscord(tls=True), FakeDiscord(tls=True)]
    adapters = []
    try:
        for fake in fakes:
            await fake.start()
            ad = DiscordAdapter(
                "tok-123456",
                kv_get=kv.aget,
                kv_set=kv.aset,
                ready_timeout=5,
                guild_ready_timeout=0.05,
                connector=fake.connector(),
            )
            adapters.append(ad)
            await ad.start(recorder)
        for fake in fakes:
            assert len(fake.identifies) == 1  # one gateway session on each
            assert [c.path for c in fake.calls[:1]] == ["/users/@me"]
        assert discord.http.Route.BASE == base == "https://discord.com/api/v10"
        assert discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY == gateway
    finally:
        for ad in adapters:
            await ad.stop()
        for fake in fakes:
            await fake.close()


async def test_settings_addresses_are_tls_and_send_discords_hosts_there():
    """`[discord] api_base_url` / `gateway_url` become the client's connector: Discord's host
    names resolve to those addresses (a process trusting the fake's certificate then talks to it
    as to Discord: tests/cli/test_cli_packaging.py); a plain http:// address is refused."""
    from adapters.discord import _Redirect, connector_to
    from agent.errors import ConfigError

    with pytest.raises(ConfigError) as exc:
        connector_to("http://127.0.0.1:9/api/v10", None)
    assert exc.value.key == "discord.api_base_url"
    await connector_to("https://127.0.0.1:9443/api/v10", "wss://127.0.0.1:9444/gw").close()
    resolver = _Redirect({"discord.com": ("127.0.0.1", 9443), "gateway.discord.gg": ("127.0.0.1", 9444)})
    try:
        [api] = await resolver.resolve("discord.com", 443)
        [gateway] = await resolver.resolve("gateway.discord.gg", 443)
        assert (api["host"], api["port"], api["hostname"]) == ("127.0.0.1", 9443, "discord.com")
        assert (gateway["host"], gateway["port"]) == ("127.0.0.1", 9444)
    finally:
        await resolver.close()


async def test_invalid_request_budget_stops_sending_before_a_ban(make_dc, dc_fake, recorder):
    """Missing permissions (403 on every send) must not march the bot towards Discord's
    10,000-invalid-requests ban; past the budget nothing is sent until the window has room."""
    now = [1000.0]
    ad = await make_dc(recorder, invalid_request_limit=3, clock=lambda: now[0])
    chat = ChatRef("discord", "300")
    forbidden = (403, {"message": "Missing Permissions", "code": 50013})
    dc_fake.fail_next[("POST", "/channels/300/messages")] = [forbidden] * 10
    for _ in range(3):
        with pytest.raises(DeliveryError):
            await ad.send_text(chat, "hello")
    assert ad.budget.is_open
    with pytest.raises(BudgetExhausted):
        await ad.send_text(chat, "hello")
    assert len(dc_fake.calls_matching("POST", "/channels/300/messages")) == 3  # the 4th never left
    assert ad.budget.refused == 1
    dc_fake.fail_next.clear()
    now[0] += 601  # the window moves on: sending again, and it works
    await ad.send_text(chat, "permissions fixed")
    assert dc_fake.bot_messages(300)[-1]["content"] == "permissions fixed"


def test_shared_scope_429s_do_not_count():
    budget = InvalidRequestBudget(limit=2, clock=lambda: 0.0)
    budget.record(429, "shared")
    budget.record(404)
    budget.record(200)
    assert budget.count == 0
    budget.record(429, "user")
    budget.record(401)
    assert budget.is_open


async def test_an_open_budget_leaves_the_gateway_connection_alone():
    from types import SimpleNamespace

    from multidict import CIMultiDict

    budget = InvalidRequestBudget(limit=1, clock=lambda: 0.0)
    budget.record(403)
    on_start = budget.trace_config().on_request_start[0]
    ws = SimpleNamespace(headers=CIMultiDict({"Upgrade": "websocket"}))
    await on_start(None, SimpleNamespace(), ws)  # a reconnect to the gateway still goes out
    with pytest.raises(BudgetExhausted):
        await on_start(None, SimpleNamespace(), SimpleNamespace(headers=CIMultiDict()))
