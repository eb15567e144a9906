"""One command definition drives every surface: every command is defined once with its
words in English and Chinese; the Telegram menu the real App publishes, /help (one grouped message
in the chat's language, no tool names) and the replies of /status, /tasks, /skills and /brief after
`/lang zh` all come from it. Fake Telegram Bot API / fake Discord → adapter → gateway, real SQLite."""

from __future__ import annotations

import inspect
import re

import pytest

from agent.providers.scripted import ScriptedClient
from bot.commands import GROUPS, CommandRegistry, builtin_commands
from bot.commands.background import skill_commands
from scheduler.service import ScheduleService
from tests.bot.conftest import ALICE, make_discord_app
from tests.fakes.discord_fake import FakeDiscord

CJK = re.compile(r"[\u4e00-\u9fff]")
TOOL_NAMES = ("screen_stocks", "update_portfolio", "run_backtest", "write_file", "exec_command", "Tools (")


def test_every_command_has_english_and_chinese_words():
    from agent.skills import builtin_skills

    class Skills:
        skills = builtin_skills()

        def get(self, name):
            return self.skills.get(name)

    commands = [*builtin_commands(), *skill_commands(Skills())]
    for c in commands:
        spec = c.spec
        assert spec.group in GROUPS
        assert re.fullmatch(r"[a-z0-9_]{1,32}", spec.name), spec.name
        assert spec.description.en and 3 <= len(spec.description.en) <= 100, spec.name
        assert CJK.search(spec.description.zh), f"/{spec.name} has no Chinese description"
        # Traditional text only where it really is Traditional: none is written yet, so none is shown
        assert spec.description.zh_tw is None, spec.name
        for option in [*spec.options, *(o for s in spec.subcommands for o in s.options)]:
            assert option.description.en and CJK.search(option.description.zh), (spec.name, option.name)
        for sub in spec.subcommands:
            assert CJK.search(sub.description.zh), (spec.name, sub.name)


def test_the_gateways_admin_only_and_keeps_waiting_sets_come_from_the_specs():
    registry = CommandRegistry(builtin_commands())
    names = [s.name for s in registry.specs()]
    assert {n for n in names if registry.admin_only_in_groups(n)} == {
        "model",
        "lang",
        "brief",
        "clear",
        "rules",
    }
    assert {n for n in names if registry.keeps_waiting(n)} == {
        "approve", "deny", "status", "help", "lang", "cancel", "rules"
    }  # fmt: skip
    assert not registry.admin_only_in_groups("no_such_command")


async def test_telegram_menu_comes_from_the_specs_in_both_languages(harness):
    await harness.start()
    en = {c["command"]: c["description"] for c in harness.api.commands[""]}
    zh = {c["command"]: c["description"] for c in harness.api.commands["zh"]}
    assert {"new", "status", "brief", "tasks", "memory", "rules", "skills", "checkup"} <= set(en)
    assert list(en) == list(zh)
    assert zh["checkup"] == "持仓健康体检" and en["checkup"] == "Portfolio health check"
    assert all(CJK.search(d) for d in zh.values()), zh


async def test_help_is_one_grouped_message_in_the_chats_language(harness):
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "/help", user_id=ALICE)
    en = await api.wait_for(lambda: next((t for t in api.texts(ALICE) if t.startswith("Commands:")), None))
    for heading in ("Conversation", "Approvals", "Background tasks and briefs", "Memory", "Skills"):
        assert f"\n{heading}" in en, heading
    assert "/brief — Daily brief" in en and "/checkup" in en and "/rules — Standing approvals" in en
    assert not any(name in en for name in TOOL_NAMES)
    assert len(en) < 2000  # one short message
    api.push_text(ALICE, "/lang zh", user_id=ALICE)
    api.push_text(ALICE, "/help", user_id=ALICE)
    zh = await api.wait_for(lambda: next((t for t in api.texts(ALICE) if t.startswith("命令：")), None))
    for heading in ("对话", "确认", "后台任务与简报", "记忆", "技能"):
        assert f"\n{heading}" in zh, heading
    assert "/new — 开始新对话" in zh and "/tasks — 后台任务" in zh
    assert not any(name in zh for name in TOOL_NAMES)
    assert len(api.texts(ALICE)) == 3  # each /help is one message


async def test_replies_are_chinese_after_lang_zh(harness):
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "/lang zh", user_id=ALICE)
    await api.wait_for(lambda: "语言已切换为中文。" in api.texts(ALICE))
    for command in ("/status", "/tasks", "/skills", "/brief", "/tasks show nope"):
        api.push_text(ALICE, command, user_id=ALICE)
    await api.wait_for(lambda: len(api.texts(ALICE)) == 6)
    status, tasks, skills, brief, show = api.texts(ALICE)[1:]
    assert "运行中：否" in status and "no" not in status.split("运行中：")[1].split("\n")[0]
    assert tasks.startswith("本对话没有后台任务")
    assert skills.startswith("技能（") and "/checkup — 持仓健康体检" in skills
    # /brief's words are the scheduler's: the chat's language is passed once it takes one
    if "lang" in inspect.signature(ScheduleService.handle_brief_command).parameters:
        assert CJK.search(brief), brief
    assert show == "本对话没有任务 nope。"


@pytest.fixture
async def discord_app(tmp_path):
    fake = FakeDiscord(tls=True)
    await fake.start()
    app = make_discord_app(tmp_path / "home", fake, ScriptedClient(), "[42]", TAPEBOT_MEMORY__ENABLED="false")
    await app.start(adapters=True)
    yield fake
    await app.stop()
    await fake.close()


async def test_discord_typed_commands_reach_the_same_handlers(discord_app):
    fake = discord_app
    payload = {c["name"]: c for c in fake.command_syncs[0]["payload"]}
    assert [c["value"] for c in payload["lang"]["options"][0]["choices"]] == ["en", "zh"]
    await fake.push_command("lang", [{"type": 3, "name": "language", "value": "zh"}], user_id=42)
    await fake.wait_for(lambda: any(f["message"]["content"] == "语言已切换为中文。" for f in fake.followups))
    await fake.push_command("tasks", [{"type": 1, "name": "show", "options": [
        {"type": 3, "name": "id", "value": "bg7"}]}], user_id=42)  # fmt: skip
    await fake.wait_for(lambda: any("本对话没有任务 bg7" in f["message"]["content"] for f in fake.followups))
    # autocomplete of /model, answered from the configured models
    await fake.push_autocomplete(
        "model", [{"type": 3, "name": "model", "value": "", "focused": True}], user_id=42
    )
    await fake.wait_for(lambda: any(c["type"] == 8 for c in fake.callbacks))
    choices = next(c for c in fake.callbacks if c["type"] == 8)["data"]["choices"]
    assert choices and all(c["name"] == c["value"] for c in choices)
