"""A background task's own message in a zh chat: the progress message it edits closes
with its status in Chinese ("✓ run_backtest · <id> · 已完成"), through the real App and the fake
Telegram Bot API. The notification the model gets stays English; the model writes the reply."""

from __future__ import annotations

from agent.providers.scripted import reply
from tests.bot.conftest import ALICE


async def test_a_tasks_closing_line_is_chinese_after_lang_zh(harness):
    def report(req):
        assert "<task-notification>" in req.messages[-1].text and "finished" in req.messages[-1].text
        return reply("回测完成。")

    harness.script.add(
        reply(tool_calls=[("run_backtest", {"codes": ["600519"], "start": "2025-01-02"})]),
        reply("已在后台开始回测。"),
        report,
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "/lang zh", user_id=ALICE)
    await api.wait_for(lambda: "语言已切换为中文。" in api.texts(ALICE))
    api.push_text(ALICE, "回测 600519", user_id=ALICE)
    await api.wait_for(lambda: "回测完成。" in api.texts(ALICE), timeout=60)
    done = await api.wait_for(
        lambda: next((t for t in api.texts(ALICE) if t.startswith("✓ run_backtest · ")), None), timeout=10
    )
    assert done.endswith(" · 已完成"), done
    assert not any(
        t.startswith("⏳ run_backtest") and t.split(": ", 1)[-1] in ("running", "queued")
        for t in api.texts(ALICE)
    )
