"""What `/brief` and the `/status` brief lines say, in English and Chinese.

The scheduler sits below bot/, so it keeps its own small table instead of bot/i18n.STRINGS; the
chat's language is passed in (`lang`), English by default. The English `err_*` texts are also the
messages of `ScheduleError`, which the model reads through the schedule tools.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

SCHEDULE_STRINGS: dict[str, dict[str, str]] = {
    "en": {
        "days_daily": "every day",
        "days_weekdays": "weekdays (Mon–Fri)",
        "days_trading_days": "trading days",
        "usage": "Usage: /brief 08:30 · /brief 08:30 Asia/Shanghai · /brief weekdays 21:00 · "
        "/brief trading_days 08:30 · /brief now · /brief pause · /brief resume · /brief off · /brief tz <zone>",
        "none_set_zone": "No brief is set (chat time zone: {zone}).",
        "chat_zone": "Chat time zone: {zone}",
        "set": "Brief set: {line}",
        "replaces": "(replaces {old})",
        "off": "Brief turned off.",
        "none_was_set": "No brief was set.",
        "none_set": "No brief is set.",
        "now": "Preparing your brief now…",
        "paused_reply": "Brief paused.",
        "resumed_reply": "Brief resumed.",
        "zone_set": "This chat's time zone is now {zone}. New briefs use it; existing ones keep theirs "
        "(set them again to move them).",
        "paused": "paused",
        "next": "next {when}",
        "last": "last: {status}",
        "status_delivered": "delivered",
        "status_failed": "failed",
        "status_interrupted": "interrupted",
        "status_skipped": "skipped {date}: market closed",
        "status_missed": "missed {when}: tapebot was not running",
        # errors (also the ScheduleError messages the model sees)
        "err_unknown_zone": "unknown time zone {name!r}; use an IANA name such as Asia/Shanghai, "
        "Europe/London or America/New_York",
        "err_two_day_sets": "two day sets in {text!r}; use one of daily, weekdays, trading_days",
        "err_bad_time": "bad time in {text!r}; use HH:MM, 24-hour, e.g. 08:30",
        "err_not_understood": "did not understand {token!r} in {text!r}",
        "err_needs_time": "a brief needs a time, e.g. 08:30, 'weekdays 21:00' or 'trading_days 08:30 Asia/Shanghai'",
        "err_needs_zone": "give a zone, e.g. /brief tz Asia/Shanghai",
        "err_too_many": "this chat already has {n} schedules; delete one first",
        "err_not_found": "no schedule {id!r} in this chat",
        "err_no_scheduler": "the scheduler is not running in this process",
    },
    "zh": {
        "days_daily": "每天",
        "days_weekdays": "工作日（周一至周五）",
        "days_trading_days": "交易日",
        "usage": "用法：/brief 08:30 · /brief 08:30 Asia/Shanghai · /brief weekdays 21:00（工作日）· "
        "/brief trading_days 08:30（交易日）· /brief now（立即）· /brief pause（暂停）· /brief resume（恢复）· "
        "/brief off（关闭）· /brief tz <时区>",
        "none_set_zone": "尚未设置简报（本对话时区：{zone}）。",
        "chat_zone": "本对话时区：{zone}",
        "set": "已设置简报：{line}",
        "replaces": "（取代 {old}）",
        "off": "简报已关闭。",
        "none_was_set": "本来就没有设置简报。",
        "none_set": "尚未设置简报。",
        "now": "正在准备你的简报…",
        "paused_reply": "简报已暂停。",
        "resumed_reply": "简报已恢复。",
        "zone_set": "本对话的时区已设为 {zone}。新的简报使用它；已有的简报保持原时区（重新设置即可改用新时区）。",
        "paused": "已暂停",
        "next": "下次 {when}",
        "last": "上次：{status}",
        "status_delivered": "已送达",
        "status_failed": "失败",
        "status_interrupted": "被中断",
        "status_skipped": "已跳过 {date}（休市）",
        "status_missed": "错过 {when}（tapebot 未运行）",
        "err_unknown_zone": "未知时区“{name}”；请使用 IANA 名称，如 Asia/Shanghai、Europe/London 或 America/New_York",
        "err_two_day_sets": "“{text}”中有两个日期集合；请只用 daily、weekdays、trading_days 之一",
        "err_bad_time": "“{text}”中的时间无效；请用 24 小时制 HH:MM，如 08:30",
        "err_not_understood": "看不懂“{text}”中的“{token}”",
        "err_needs_time": "简报需要一个时间，如 08:30、weekdays 21:00 或 trading_days 08:30 Asia/Shanghai",
        "err_needs_zone": "请给出时区，如 /brief tz Asia/Shanghai",
        "err_too_many": "本对话已有 {n} 个定时任务；请先删除一个",
        "err_not_found": "本对话没有定时任务 {id}",
        "err_no_scheduler": "本进程中没有运行调度器",
    },
}

_WEEKDAYS_ZH = "一二三四五六日"
_SKIPPED = re.compile(r"^skipped (?P<date>\S+): market closed$")
_MISSED = re.compile(r"^missed (?P<when>.+): tapebot was not running$")


def say(lang: str, key: str, **kw: Any) -> str:
    table = SCHEDULE_STRINGS.get(lang) or SCHEDULE_STRINGS["en"]
    text = table.get(key) or SCHEDULE_STRINGS["en"][key]
    return text.format(**kw) if kw else text


def days_text(lang: str, days: str) -> str:
    return say(lang, f"days_{days}")


def when_text(lang: str, when: datetime) -> str:
    """A next-run instant: "Thu 05 Dec 08:30" / "12-05 周四 08:30"."""
    if lang == "zh":
        return f"{when:%m-%d} 周{_WEEKDAYS_ZH[when.weekday()]} {when:%H:%M}"
    return f"{when:%a %d %b %H:%M}"


def day_time_text(lang: str, when: datetime) -> str:
    """A last-run instant: "12 Jun 08:30" / "06-12 08:30"."""
    return f"{when:%m-%d %H:%M}" if lang == "zh" else f"{when:%d %b %H:%M}"


def status_text(lang: str, stored: str) -> str:
    """A stored `last_status` (English words written by the jobs) in the chat's language; a note
    this table does not know is shown as stored."""
    if stored in ("delivered", "failed", "interrupted"):
        return say(lang, f"status_{stored}")
    if m := _SKIPPED.match(stored):
        return say(lang, "status_skipped", date=m["date"])
    if m := _MISSED.match(stored):
        return say(lang, "status_missed", when=m["when"])
    return stored


def error_text(lang: str, exc: Exception) -> str:
    """A `ScheduleError` for the chat: its keyed message in `lang`, else its own text."""
    key = getattr(exc, "key", "")
    if key and f"err_{key}" in SCHEDULE_STRINGS["en"]:
        return say(lang, f"err_{key}", **getattr(exc, "params", {}))
    return str(exc)
