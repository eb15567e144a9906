"""One person, one account, end to end: Telegram (fake Bot API) and Discord (fake REST + gateway) in
one bot. Discord asks for a code; Telegram shows whom it links with and confirms; a buy on Telegram
is then in the portfolio Discord sees; /unlink takes Discord back to its own book. Wrong codes and a
user not on the allow-list link nothing; a group cannot link and keeps its own book; a linked
identity gains no approval rights on the other platform."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from agent.providers.scripted import ScriptedClient, reply
from bot.app import App
from bot.i18n import t
from config.loader import load_settings
from tests.bot.conftest import ON_BOTH_DATABASES
from tests.fakes.discord_fake import FakeDiscord
from tests.fakes.telegram_api import FakeBotAPI, FakeRequest, button_of

TG_ALICE, TG_STRANGER, TG_GROUP = 1001, 1666, -100777
DC_ALICE, DC_ADMIN, DC_CHANNEL = 42, 43, 300
CODE = re.compile(r"\b([A-HJ-NP-Z2-9]{8})\b")


def buttons_of(msg):
    return [b for row in (msg.get("reply_markup") or {}).get("inline_keyboard", []) for b in row]


def tool_json(req) -> dict:
    assert req.messages[-1].role == "tool", [(m.role, m.text[:60]) for m in req.messages]
    return json.loads(req.messages[-1].tool_results[0].content)


class Both:
    """One App serving Telegram and Discord, a scripted model, and what each platform received."""

    def __init__(self, home, api: FakeBotAPI, fake: FakeDiscord, script: ScriptedClient, env: dict):
        self.home, self.api, self.fake, self.script, self.env = home, api, fake, script, env
        self.app: App | None = None

    async def start(self) -> App:
        env = {
            "TAPEBOT_HOME": str(self.home),
            "OPENAI_API_KEY": "sk-test-not-used-000000",
            "TELEGRAM_BOT_TOKEN": "123456:TEST-token-abcdef",
            "TAPEBOT_TELEGRAM__ALLOWED_USERS": f"[{TG_ALICE}]",
            "TAPEBOT_TELEGRAM__ADMINS": f"[{TG_ALICE}]",
            "DISCORD_BOT_TOKEN": "discord-test-token-abcdef",
            "TAPEBOT_DISCORD__ALLOWED_USERS": f"[{DC_ALICE},{DC_ADMIN}]",
            "TAPEBOT_DISCORD__ADMINS": f"[{DC_ADMIN}]",
            "TAPEBOT_SCHEDULER__ENABLED": "false",
            "TAPEBOT_MEMORY__ENABLED": "false",
            "TAPEBOT_AGENT__SHUTDOWN_GRACE_S": "0.5",
            **self.env,
        }
        options = {
            "request": FakeRequest(self.api),
            "get_updates_request": FakeRequest(self.api),
            "poll_timeout": 0.05,
        }
        self.app = App(
            load_settings(self.home, env),
            model_factory=lambda _m: self.script,
            adapter_options={"telegram": options, "discord": {"connector": self.fake.connector()}},
        )
        await self.app.start(adapters=True)
        return self.app

    async def stop(self) -> None:
        if self.app is not None:
            await self.app.stop()
            self.app = None

    async def discord_command(self, name: str, args: str = "", user_id: int = DC_ALICE) -> str:
        press = await self.fake.push_slash(name, args, user_id=user_id, channel_id=DC_CHANNEL)
        found = await self.fake.wait_for(
            lambda: [f["message"]["content"] for f in self.fake.followups if f["token"] == press["token"]]
        )
        return found[0]

    async def telegram(self, text: str, user_id: int = TG_ALICE, chat: int | None = None) -> str:
        chat = chat if chat is not None else user_id
        before = len(self.api.texts(chat))
        self.api.push_text(chat, text, user_id=user_id)
        return (await self.api.wait_for(lambda: self.api.texts(chat)[before:], timeout=15))[0]


@pytest.fixture
async def both(tmp_path, monkeypatch, database_env):
    fake = FakeDiscord(tls=True)
    await fake.start()
    b = Both(tmp_path / "home", FakeBotAPI(), fake, ScriptedClient(), database_env)
    yield b
    await b.stop()
    await fake.close()


async def link_discord_to_telegram(both: Both) -> str:
    """Discord asks for a code; Telegram previews whom it links, then confirms. Returns the code."""
    answer = await both.discord_command("link")
    assert t("en", "link_none") in answer
    code = CODE.search(answer).group(1)
    preview = await both.telegram(f"/link {code}")
    assert "Discord" in preview and str(DC_ALICE) in preview and f"/link {code} yes" in preview
    assert await both.app.links.account_of(f"telegram:{TG_ALICE}") == ""  # not linked by looking
    done = await both.telegram(f"/link {code} yes")
    assert done.startswith("✅") and "Discord" in done
    return code


async def paper_buy_on_telegram(both: Both) -> None:
    both.script.add(
        reply(tool_calls=[("execute_trade", {"code": "600519", "side": "buy", "quantity": 100})]),
        reply("Bought 100 shares of 600519 (paper)."),
    )
    api = both.api
    api.push_text(TG_ALICE, "buy 100 shares of 600519", user_id=TG_ALICE)
    card = await api.wait_for(
        lambda: next((m for m in api.sent(TG_ALICE) if buttons_of(m)), None), timeout=15
    )
    once = button_of(card, "o")
    api.push_callback(TG_ALICE, card["message_id"], once["callback_data"], user_id=TG_ALICE)
    await api.wait_for(lambda: any("Bought 100 shares" in x for x in api.texts(TG_ALICE)), timeout=15)


async def discord_portfolio(both: Both) -> list[dict]:
    seen: dict = {}

    def after(req):
        seen["pf"] = tool_json(req)
        return reply("Here is your portfolio.")

    both.script.add(reply(tool_calls=[("portfolio", {"mode": "view"})]), after)
    before = len(both.fake.bot_messages(DC_CHANNEL))
    await both.fake.push_dm(channel_id=DC_CHANNEL, user_id=DC_ALICE, content="how is my portfolio")
    await both.fake.wait_for(
        lambda: any(
            "Here is your portfolio." in m["content"] for m in both.fake.bot_messages(DC_CHANNEL)[before:]
        )
    )
    return [p for p in seen["pf"]["paper"]["positions"] if "600519" in p.get("symbol", "")]


@ON_BOTH_DATABASES
async def test_a_buy_on_telegram_is_in_the_portfolio_discord_sees_until_unlinked(both):
    await both.start()
    await link_discord_to_telegram(both)
    assert "Telegram" in await both.discord_command("link")  # /link lists the link (and a new code)

    await paper_buy_on_telegram(both)
    held = await discord_portfolio(both)
    assert len(held) == 1 and held[0]["quantity"] == 100

    # each chat keeps its own conversation: the Discord session never saw the Telegram buy
    discord_messages = json.dumps([m.text for m in both.script.requests[-1].messages], ensure_ascii=False)
    assert "buy 100 shares" not in discord_messages

    assert await both.discord_command("unlink") == t("en", "unlink_done")
    assert await discord_portfolio(both) == []  # back to Discord's own (empty) book
    assert await both.discord_command("unlink") == t("en", "unlink_none")


async def test_wrong_expired_and_strangers_codes_link_nothing(both):
    app = await both.start()
    assert await both.telegram("/link ZZZZ2222") == t("en", "link_invalid")
    answer = await both.discord_command("link")
    code = CODE.search(answer).group(1)
    # a user not on Telegram's allow-list is refused before any command runs
    refused = await both.telegram(f"/link {code} yes", user_id=TG_STRANGER)
    assert str(TG_STRANGER) in refused and "allow-list" in refused
    assert await app.links.account_of(f"telegram:{TG_STRANGER}") == ""
    assert await app.links.account_of(f"discord:{DC_ALICE}") == ""
    assert await both.discord_command("link", code) == t("en", "link_self")  # not with itself
    # the code still works for the person it was meant for; used once, it is gone
    assert (await both.telegram(f"/link {code} yes")).startswith("✅")
    answer = await both.discord_command("link", f"{code} yes", user_id=DC_ADMIN)
    assert answer == t("en", "link_invalid")
    # an expired code: the store's clock moves past its ten minutes
    code = CODE.search(await both.telegram("/link")).group(1)
    from datetime import timedelta

    from memory.links import CODE_TTL

    real = app.links.clock
    app.links.clock = type("Later", (), {"now": lambda self: real.now() + CODE_TTL + timedelta(seconds=1)})()
    try:
        assert await both.discord_command("link", f"{code} yes", user_id=DC_ADMIN) == t("en", "link_expired")
    finally:
        app.links.clock = real
    assert await app.links.account_of(f"discord:{DC_ADMIN}") == ""


async def test_a_guesser_is_stopped_in_the_chat_language(both):
    await both.start()
    for _ in range(5):
        assert await both.telegram("/link ABCDEFGH") == t("en", "link_invalid")
    assert "Try again in" in await both.telegram("/link ABCDEFGH")


async def test_a_group_cannot_link_and_keeps_its_own_book(both):
    app = await both.start()
    await link_discord_to_telegram(both)
    await paper_buy_on_telegram(both)
    # in a group, /link is refused and the portfolio is the group's, not the linked person's
    assert await both.telegram("/link", chat=TG_GROUP) == t("en", "link_group")
    seen: dict = {}

    def after(req):
        seen["pf"] = tool_json(req)
        return reply("Group portfolio.")

    both.script.add(reply(tool_calls=[("portfolio", {"mode": "view"})]), after)
    both.api.push_text(TG_GROUP, "@tapebot_test_bot how is the portfolio", user_id=TG_ALICE)
    await both.api.wait_for(
        lambda: any("Group portfolio." in x for x in both.api.texts(TG_GROUP)), timeout=15
    )
    assert [p for p in seen["pf"]["paper"]["positions"] if "600519" in p.get("symbol", "")] == []
    assert app.links is not None


async def test_a_linked_identity_gains_no_approval_rights_elsewhere(both):
    """Telegram Alice is an admin on Telegram; linked to Discord Alice (not a Discord admin), a
    Discord group card still needs a Discord admin."""
    await both.start()
    await link_discord_to_telegram(both)
    both.script.add(reply(tool_calls=[("write_file", {"path": "g.txt", "content": "x"})]), reply("Saved."))
    fake = both.fake
    await fake.push_guild_message(700, 310, DC_ALICE, "write g.txt", mention_bot=True)

    def card():
        return next((m for m in fake.bot_messages(310) if m.get("components")), None)

    msg = await fake.wait_for(card)
    once = next(
        c for row in msg["components"] for c in row["components"] if c["custom_id"].startswith("tb:o:")
    )
    press = await fake.push_button(once["custom_id"], message_id=msg["id"], user_id=DC_ALICE, channel_id=310,
                                   guild_id=700)  # fmt: skip
    answers = await fake.wait_for(
        lambda: [f["message"] for f in fake.followups if f["token"] == press["token"]]
    )
    assert t("en", "approval_admin_only") in answers[0]["content"]
    await asyncio.sleep(0.2)
    assert not (both.home / "workspace" / "g.txt").exists()


async def test_always_allow_on_telegram_covers_the_same_order_on_discord_once_linked(both):
    await both.start()
    await link_discord_to_telegram(both)
    buy = {"code": "600519", "side": "buy", "quantity": 100}
    both.script.add(reply(tool_calls=[("execute_trade", buy)]), reply("Bought on Telegram."))
    api = both.api
    api.push_text(TG_ALICE, "buy 100 moutai", user_id=TG_ALICE)
    card = await api.wait_for(
        lambda: next((m for m in api.sent(TG_ALICE) if buttons_of(m)), None), timeout=15
    )
    always = button_of(card, "a")
    api.push_callback(TG_ALICE, card["message_id"], always["callback_data"], user_id=TG_ALICE)
    await api.wait_for(lambda: any("Bought on Telegram." in x for x in api.texts(TG_ALICE)), timeout=15)

    # the same order asked on Discord runs under the shared standing approval: no card there
    both.script.add(reply(tool_calls=[("execute_trade", buy)]), reply("Bought on Discord."))
    fake = both.fake
    await fake.push_dm(channel_id=DC_CHANNEL, user_id=DC_ALICE, content="same again")
    await fake.wait_for(
        lambda: any("Bought on Discord." in m["content"] for m in fake.bot_messages(DC_CHANNEL))
    )
    assert not [m for m in fake.bot_messages(DC_CHANNEL) if m.get("components")]
    listed = await both.discord_command("rules")
    assert "buy 600519" in listed  # Discord's /rules shows the shared rule

    # after /unlink the rule no longer reaches Discord: the order asks again
    await both.discord_command("unlink")
    both.script.add(reply(tool_calls=[("execute_trade", buy)]), reply("Asked."))
    await fake.push_dm(channel_id=DC_CHANNEL, user_id=DC_ALICE, content="and again")
    await fake.wait_for(lambda: [m for m in fake.bot_messages(DC_CHANNEL) if m.get("components")])
