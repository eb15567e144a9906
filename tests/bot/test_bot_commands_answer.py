"""Every command answers: `/skills` lists the skills, and a command whose handler
fails replies with a short error in the chat's language instead of leaving the user in silence.
Fake Telegram Bot API → adapter → gateway, real SQLite."""

from __future__ import annotations

from adapters.commandspec import CommandSpec, Words
from bot.commands import Command
from tests.bot.conftest import ALICE


async def test_skills_lists_the_skills(harness):
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "/skills", user_id=ALICE)
    await api.wait_for(lambda: any("/checkup" in t for t in api.texts(ALICE)))
    listing = next(t for t in api.texts(ALICE) if "/checkup" in t)
    assert "/screen" in listing and "/daily_brief" in listing


async def test_a_failing_command_answers_with_a_short_error(harness):
    app = await harness.start()

    async def broken(ctx):
        raise AttributeError("'str' object has no attribute 'name'")

    app.gateway.commands.add(Command(CommandSpec("broken", Words("Broken", "坏的"), "session"), broken))
    api = harness.api
    api.push_text(ALICE, "/broken", user_id=ALICE)
    await api.wait_for(lambda: any("/broken" in t for t in api.texts(ALICE)))
    text = next(t for t in api.texts(ALICE) if "/broken" in t)
    assert "failed" in text and "attribute" not in text  # short, no internals
    # the chat's language: after /lang zh the same failure is told in Chinese
    api.push_text(ALICE, "/lang zh", user_id=ALICE)
    await api.wait_for(lambda: any("中文" in t for t in api.texts(ALICE)))
    api.push_text(ALICE, "/broken", user_id=ALICE)
    await api.wait_for(lambda: sum("/broken" in t for t in api.texts(ALICE)) == 2)
    assert "失败" in [t for t in api.texts(ALICE) if "/broken" in t][-1]
    # the bot keeps working after it
    api.push_text(ALICE, "/cancel", user_id=ALICE)
    await api.wait_for(lambda: any("没有正在运行" in t for t in api.texts(ALICE)))
