"""On Discord an approval card is an embed (title, the facts, who may approve,
expiry, what "Always allow" covers, raw arguments) with the same words as the Telegram card, sent
through the fake Discord REST API; once decided, the embed gives way to the final line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.consent import StandingScope
from agent.ports import ApprovalRecord
from agent.providers.scripted import reply
from bot import cards
from bot.i18n import t
from tests.bot import test_bot_discord_flow as discord_flow
from tests.bot.test_bot_discord_flow import USER, components

discord_app = discord_flow.discord_app
BUY = {"code": "600519", "side": "buy", "quantity": 100}


def embed_text(msg: dict) -> str:
    """Everything an embed shows, in order."""
    out = []
    for e in msg.get("embeds", []):
        out += [e.get("title", ""), e.get("description", "")]
        for f in e.get("fields", []):
            out += [f["name"], f["value"]]
        out.append((e.get("footer") or {}).get("text", ""))
    return "\n".join(out)


async def test_a_discord_trade_card_is_an_embed_with_the_trade_facts(discord_app):
    fake, script, start, _ = discord_app
    await start()
    script.add(reply(tool_calls=[("execute_trade", BUY)]), reply("Bought on Discord."))
    await fake.push_dm(channel_id=300, user_id=USER, content="buy 100 moutai")
    card = await fake.wait_for(lambda: next((m for m in fake.bot_messages(300) if components(m)), None))
    assert len(card["embeds"]) == 1, card
    embed = card["embeds"][0]
    assert t("en", "approval_title") in embed["title"]
    shown = embed_text(card)
    for part in (
        "贵州茅台 (600519)",
        "BUY 100",
        "PAPER",
        "Last price",
        "2025-09-03",
        "Estimated amount",
        "fees",
        "Cash 1,000,000.00 →",
        t("en", "card_who_dm"),
        "Expires",
        "in 30 min",
        "buy 600519 ≤ 100 per order",
        "Raw arguments",
        '"quantity": 100',
        '"code": "600519"',
    ):
        assert part in shown, (part, shown)
    assert {f["name"] for f in embed["fields"]} >= {t("en", "card_raw")}
    once = next(c for c in components(card) if c["custom_id"].startswith("tb:o:"))
    await fake.push_button(once["custom_id"], message_id=card["id"], user_id=USER, channel_id=300)
    await fake.wait_for(lambda: any("Bought on Discord." in m["content"] for m in fake.bot_messages(300)))
    assert not card["embeds"] and "Approved by" in card["content"] and not components(card)


def test_the_discord_embed_says_the_same_as_the_text_card():
    """Same content, by construction: every line of the text card (minus markup) is in the embed."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    record = ApprovalRecord(
        id="ab12", session_id="s", turn_id="t1", call_id="c1", tool="write_file",
        arguments={"path": "a.txt", "content": "x"}, args_hash="0" * 64, created_at=now,
        expires_at=now + timedelta(minutes=30),
    )  # fmt: skip
    scope = StandingScope(tool="write_file", kind="path", path="a.txt")
    for lang in ("en", "zh"):
        for group in (False, True):
            info = cards.CardInfo(expires_at=record.expires_at, group=group, scope=scope)
            text, buttons = cards.approval_card(record, lang, info, now)
            view, view_buttons = cards.approval_view(record, lang, info, now)
            assert view.text == text and view_buttons == buttons
            shown = "\n".join([view.title, view.body, *(f"{n}\n{v}" for n, v in view.fields), view.footer])
            shown = cards.plain(shown)
            for line in cards.plain(text).splitlines():
                assert line.strip() in shown, (line, shown)
