"""`/brief` and the `/status` brief line after `/lang zh`, through the real App and the fake Telegram
Bot API: every reply is Chinese, errors and usage included; English after `/lang en`."""

from __future__ import annotations

from agent.providers.scripted import ScriptedClient
from tests.bot.conftest import ALICE, Harness
from tests.fakes.telegram_api import FakeBotAPI


def _new(api: FakeBotAPI, seen: int) -> list[str]:
    return api.texts(ALICE)[seen:]


async def _ask(api: FakeBotAPI, text: str) -> str:
    seen = len(api.texts(ALICE))
    api.push_text(ALICE, text, user_id=ALICE)
    replies = await api.wait_for(lambda: _new(api, seen) or None, timeout=10)
    return replies[0]


async def test_brief_replies_in_chinese_after_lang_zh(tmp_path):
    api = FakeBotAPI()
    h = Harness(tmp_path / "home", api, ScriptedClient(), extra_env={"TAPEBOT_SCHEDULER__ENABLED": "true"})
    try:
        await h.start()
        assert await _ask(api, "/lang zh") == "语言已切换为中文。"
        shown = await _ask(api, "/brief")
        assert shown.startswith("尚未设置简报（本对话时区：") and "用法：/brief 08:30" in shown
        set_ = await _ask(api, "/brief weekdays 08:30 Asia/Shanghai")
        assert set_.startswith("已设置简报：") and "工作日（周一至周五） 08:30 Asia/Shanghai · 下次 " in set_
        bad = await _ask(api, "/brief 27:00")
        assert bad.startswith("“27:00”中的时间无效") and "用法：" in bad
        assert (await _ask(api, "/brief pause")) == "简报已暂停。"
        status = await _ask(api, "/status")
        assert "工作日（周一至周五） 08:30 Asia/Shanghai · 已暂停" in status and "paused" not in status
        assert (await _ask(api, "/brief off")) == "简报已关闭。"
        assert (await _ask(api, "/lang en")) == "Language set to English."
        assert (await _ask(api, "/brief off")) == "No brief was set."
    finally:
        await h.stop()


async def test_status_shows_the_brief_line_in_chinese_after_lang_zh(tmp_path):
    api = FakeBotAPI()
    h = Harness(tmp_path / "home", api, ScriptedClient(), extra_env={"TAPEBOT_SCHEDULER__ENABLED": "true"})
    try:
        app = await h.start()
        assert await _ask(api, "/lang zh") == "语言已切换为中文。"
        await app.schedules.create(f"telegram:{ALICE}", "trading_days 08:30", timezone="Asia/Shanghai")
        status = await _ask(api, "/status")
        assert "交易日 08:30 Asia/Shanghai · 下次 " in status and "trading days" not in status
        assert (await _ask(api, "/lang en")) == "Language set to English."
        assert "trading days 08:30 Asia/Shanghai · next " in await _ask(api, "/status")
    finally:
        await h.stop()
