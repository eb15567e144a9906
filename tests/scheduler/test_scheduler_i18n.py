"""`/brief` and the `/status` brief lines speak the chat's language: after `/lang zh`
every reply path of `handle_brief_command` is Chinese, errors included; English stays the default."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.app_scheduler import AppScheduler
from scheduler.i18n import SCHEDULE_STRINGS, error_text
from scheduler.service import ScheduleService
from scheduler.specs import BriefSpecError, parse_brief_command
from tests.fakes.recorder import Recorder

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture
async def running(store):
    app = AppScheduler(
        store, on_brief=Recorder(), default_timezone="Asia/Shanghai", retry_delays=(), stop_timeout=2
    )
    await app.start()
    yield app, ScheduleService(store, app, max_per_chat=3)
    await app.stop()


@pytest.mark.parametrize(
    "command",
    [
        "/brief",
        "/brief 08:30 Asia/Shanghai",
        "/brief weekdays 21:00",
        "/brief",
        "/brief pause",
        "/brief",
        "/brief resume",
        "/brief tz America/New_York",
        "/brief now",
        "/brief off",
        "/brief off",
        "/brief pause",
        "/brief 27:00",
        "/brief 08:30 Nowhere/Land",
        "/brief daily weekdays 08:30",
        "/brief 08:30 09:30",
        "/brief daily",
        "/brief tz",
        "/brief 08:30 Asia/Shanghai extra",
    ],
)
async def test_every_brief_reply_is_chinese_after_lang_zh(running, command):
    _app, service = running
    chat = "tg:zh"
    await service.handle_brief_command(chat, "u1", "/brief 07:00", lang="zh")
    reply = await service.handle_brief_command(chat, "u1", command, lang="zh")
    assert CJK.search(reply), reply
    for english in (
        "No brief",
        "Brief ",
        "Usage",
        "every day",
        "weekdays (",
        "next ",
        "Chat time zone",
        "bad time",
        "unknown time zone",
        "Preparing",
        "replaces",
        "paused",
    ):
        assert english not in reply, (command, reply)


async def test_english_is_the_default_and_unchanged(running):
    _app, service = running
    assert (await service.handle_brief_command("tg:en", "u1", "/brief")).startswith("No brief is set")
    assert (await service.handle_brief_command("tg:en", "u1", "/brief 27:00", lang="en")).startswith(
        "bad time"
    )


async def test_zh_set_reply_names_the_days_and_next_run(running):
    _app, service = running
    reply = await service.handle_brief_command("tg:1", "u1", "/brief weekdays 21:00", lang="zh")
    assert reply.startswith("已设置简报：") and "工作日（周一至周五） 21:00 Asia/Shanghai" in reply
    assert "下次" in reply
    reply = await service.handle_brief_command("tg:1", "u1", "/brief trading_days 08:30", lang="zh")
    assert "交易日 08:30" in reply and "取代 工作日（周一至周五） 21:00" in reply


async def test_too_many_schedules_is_chinese(store):
    service = ScheduleService(store, None, default_timezone="UTC", max_per_chat=1)
    await service.create("tg:1", "07:00")
    reply = await service.handle_brief_command("tg:1", "u1", "/brief now", lang="zh")
    assert CJK.search(reply) and "scheduler" not in reply


async def test_status_lines_translate_stored_outcomes(store):
    service = ScheduleService(store, None, default_timezone="Asia/Shanghai")
    s = await service.create("tg:1", "trading_days 08:30")
    at = datetime(2024, 6, 12, 0, 30, tzinfo=UTC)
    await store.complete_run(
        s.id,
        "2024-06-12",
        status="failed",
        attempts=3,
        error="RuntimeError: telegram unreachable",
        at=at,
        last_status="failed",
        failed=True,
    )
    [line] = await service.status_lines("tg:1", lang="zh")
    assert "交易日 08:30" in line and "上次：失败 06-12 08:30" in line and "telegram unreachable" in line
    [line] = await service.status_lines("tg:1")
    assert "last: failed 12 Jun 08:30" in line
    await store.note_status(s.id, "skipped 2024-06-15: market closed")
    [line] = await service.status_lines("tg:1", lang="zh")
    assert "上次：已跳过 2024-06-15（休市）" in line
    await store.note_status(s.id, "missed 2024-06-16 08:30 CST: tapebot was not running")
    [line] = await service.status_lines("tg:1", lang="zh")
    assert "上次：错过 2024-06-16 08:30 CST（tapebot 未运行）" in line
    await service.pause("tg:1", s.id)
    [line] = await service.status_lines("tg:1", lang="zh")
    assert "已暂停" in line


TOKENS = st.sampled_from(
    ["08:30", "27:00", "8:5", "21：00", "weekdays", "daily", "交易日", "trading days", "every day", "tz", "时区",
     "Asia/Shanghai", "Nowhere/Land", "北京", "now", "off", "pause", "resume", "show", "x", "", "/brief"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(words=st.lists(st.one_of(TOKENS, st.text(max_size=8)), max_size=5))
def test_property_every_parse_error_has_chinese_words(words):
    """Whatever follows /brief, a refusal is one of the table's errors, so a zh chat reads it in
    Chinese (an untranslated message would be a reply path left in English)."""
    text = " ".join(words)
    try:
        parse_brief_command(text)
    except BriefSpecError as exc:
        assert exc.key and f"err_{exc.key}" in SCHEDULE_STRINGS, (text, exc)
        assert CJK.search(error_text("zh", exc)) and str(exc) == error_text("en", exc)
