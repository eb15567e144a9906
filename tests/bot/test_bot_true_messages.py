"""Messages that say what is true, through the fake Telegram Bot API in the chat's language:
`/approve <unknown id>` says there is no such approval (not "this button expired"); a group
member's "yes" at an admin's card hears that only an admin can approve, and that "yes" never
reaches the model; a group card's "Always allow" says it covers only admins' requests."""

from __future__ import annotations

import asyncio

from agent.providers.scripted import reply
from bot.i18n import t
from tests.bot.conftest import ADMIN, ALICE, BOB
from tests.bot.test_bot_approval_integrity import GROUP, MENTION, card_in, data_of, tap


async def test_approve_an_unknown_id_says_there_is_none_in_both_languages(harness):
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "/approve nosuch", user_id=ALICE)
    await api.wait_for(
        lambda: any("There is no approval “nosuch” waiting in this chat" in x for x in api.texts(ALICE))
    )
    api.push_text(ALICE, "/lang zh", user_id=ALICE)
    api.push_text(ALICE, "/deny nosuch", user_id=ALICE)
    await api.wait_for(lambda: any("本对话没有等待中的确认“nosuch”" in x for x in api.texts(ALICE)))
    assert not any(t("en", "approval_stale") in x or t("zh", "approval_stale") in x for x in api.texts(ALICE))


async def test_a_members_yes_at_an_admins_card_is_refused_and_never_reaches_the_model(harness):
    harness.script.add(
        reply(tool_calls=[("write_file", {"path": "g.txt", "content": "x"})]),
        reply("Group done."),
    )
    await harness.start()
    api = harness.api
    api.push_text(GROUP, f"{MENTION} write g", user_id=ADMIN)
    card = await card_in(api, GROUP)
    assert "only when an admin of this group asks" in card["text"]  # what "Always allow" covers

    api.push_text(GROUP, "yes", user_id=BOB, reply_to=card["message_id"])
    only_admin = t("en", "approval_admin_only")
    await api.wait_for(lambda: only_admin in api.texts(GROUP))
    assert not any("Saved" in x for x in api.texts(GROUP))  # not "held until decided"

    tap(api, GROUP, card["message_id"], data_of(card, "o"), ADMIN)
    await api.wait_for(lambda: "Group done." in api.texts(GROUP))
    await asyncio.sleep(0.3)  # anything held would be taken up now
    for request in harness.script.requests:
        assert [m.text for m in request.messages if m.role == "user"] == ["write g"]


# ---- Discord: usage in its own syntax, time zones found by what people type -------------------
from tests.bot.test_bot_command_specs import discord_app  # noqa: E402, F401


async def test_discord_brief_usage_is_in_slash_syntax_and_zones_are_found_by_city(discord_app):  # noqa: F811
    fake = discord_app
    await fake.push_command(
        "brief",
        [{"type": 1, "name": "set", "options": [{"type": 3, "name": "time", "value": "25:99"}]}],
        user_id=42,
    )
    usage = await fake.wait_for(
        lambda: next(
            (f["message"]["content"] for f in fake.followups if "Usage" in f["message"]["content"]), None
        )
    )
    assert "/brief set time:08:30" in usage and "/brief 08:30" not in usage

    for typed, zone in (
        ("new york", "America/New_York"),
        ("上海", "Asia/Shanghai"),
        ("beijing", "Asia/Shanghai"),
    ):
        seen = len(fake.callbacks)
        await fake.push_autocomplete(
            "brief",
            [
                {
                    "type": 1,
                    "name": "tz",
                    "options": [{"type": 3, "name": "zone", "value": typed, "focused": True}],
                }
            ],
            user_id=42,
        )
        await fake.wait_for(lambda: any(c["type"] == 8 for c in fake.callbacks[seen:]))  # noqa: B023
        choices = next(c for c in fake.callbacks[seen:] if c["type"] == 8)["data"]["choices"]
        assert choices and choices[0]["value"] == zone, (typed, choices)


async def test_progress_lines_show_tool_labels_in_the_chats_language(harness):
    harness.script.add(
        reply(tool_calls=[("get_market_price", {"code": "600519"})]), reply("茅台最新价 1480.55。")
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "/lang zh", user_id=ALICE)
    await api.wait_for(lambda: "语言已切换为中文。" in api.texts(ALICE))
    api.push_text(ALICE, "茅台现在多少钱", user_id=ALICE)
    await api.wait_for(lambda: "茅台最新价 1480.55。" in api.texts(ALICE))
    progress = [x for x in api.texts(ALICE) if x.startswith(("⏳", "✓", "✗"))]
    assert progress and all("查询价格" in x for x in progress), api.texts(ALICE)
    assert not any("get_market_price" in x for x in api.texts(ALICE))


async def test_tasks_show_gives_lines_and_a_table_not_json(harness):
    import json
    from datetime import UTC, datetime

    from agent.task_ledger import TaskRecord
    from tests.bot.test_bot_commands_flow import _state

    await harness.start()
    api = harness.api
    api.push_text(ALICE, "/status", user_id=ALICE)  # the chat exists
    await api.wait_for(lambda: api.texts(ALICE))
    state = await _state(harness)
    result = {
        "total_return": 0.1234,
        "trades": [
            {"date": "2025-01-02", "side": "buy", "price": 1480.5},
            {"date": "2025-02-03", "side": "sell", "price": 1500},
        ],
        "params": {"fast": 5, "slow": 20},
    }
    now = datetime.now(UTC)
    record = TaskRecord(
        id="bt1", session_id=state.session_id, chat_key=state.key, tool_name="run_backtest", status="succeeded",
        result=json.dumps(result), created_at=now, started_at=now, finished_at=now,
    )  # fmt: skip
    await harness.app.task_manager.store.insert_task(record)
    api.push_text(ALICE, "/tasks show bt1", user_id=ALICE)
    shown = await api.wait_for(lambda: next((x for x in api.texts(ALICE) if "total return" in x), None))
    assert "- total return: 0.1234" in shown and "- params: fast 5, slow 20" in shown
    assert "date | side | price" in shown and "2025-01-02 | buy | 1,480.5" in shown  # a table
    assert "{" not in shown and '"' not in shown


async def test_a_stream_that_breaks_off_leaves_no_fragment_posing_as_an_answer(harness):
    from agent.errors import StreamInterrupted
    from agent.providers.base import TextChunk
    from agent.providers.scripted import ScriptedClient

    class BreaksOff(ScriptedClient):
        async def stream(self, request):
            self.requests.append(request)
            yield TextChunk("First ")
            await asyncio.sleep(0.05)  # the stream stalls before it breaks off
            raise StreamInterrupted("stalled after text")

    harness.script = BreaksOff()
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "summarise my week", user_id=ALICE)
    notice = t("en", "model_interrupted")
    await api.wait_for(lambda: notice in api.texts(ALICE))
    texts = api.texts(ALICE)
    assert "saved" not in notice and "not carried out" in notice  # one true statement, not two
    fragment = next(x for x in texts if x.startswith("First"))
    assert fragment == "First … ⚠️ (broken off: not the whole answer)", texts
