"""What `/brief` and the `/status` brief lines say, in English and Chinese.

The scheduler sits below bot/, so it keeps its own catalogue instead of bot/i18n.STRINGS; the
chat's language is passed in (`lang`), English by default. The English `err_*` texts are also the
messages of `ScheduleError`, which the model reads through the schedule tools.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from agent.texts import Text
from agent.texts import say as _say

SCHEDULE_STRINGS: dict[str, Text] = {
    "days_daily": Text(
        en="every day",
        zh="每天",
    ),
    "days_weekdays": Text(
        en="weekdays (Mon–Fri)",
        zh="工作日（周一至周五）",
    ),
    "days_trading_days": Text(
        en="trading days",
        zh="交易日",
    ),
    "usage": Text(
        en="Usage: /brief 08:30 · /brief 08:30 Asia/Shanghai · /brief weekdays 21:00 · /brief trading_days 08:30 · /brief now · /brief pause · /brief resume · /brief off · /brief tz <zone>",
        zh="用法：/brief 08:30 · /brief 08:30 Asia/Shanghai · /brief weekdays 21:00（工作日）· /brief trading_days 08:30（交易日）· /brief now（立即）· /brief pause（暂停）· /brief resume（恢复）· /brief off（关闭）· /brief tz <时区>",
    ),
    "none_set_zone": Text(
        en="No brief is set (chat time zone: {zone}).",
        zh="尚未设置简报（本对话时区：{zone}）。",
    ),
    "chat_zone": Text(
        en="Chat time zone: {zone}",
        zh="本对话时区：{zone}",
    ),
    "set": Text(
        en="Brief set: {line}",
        zh="已设置简报：{line}",
    ),
    "replaces": Text(
        en="(replaces {old})",
        zh="（取代 {old}）",
    ),
    "off": Text(
        en="Brief turned off.",
        zh="简报已关闭。",
    ),
    "none_was_set": Text(
        en="No brief was set.",
        zh="本来就没有设置简报。",
    ),
    "none_set": Text(
        en="No brief is set.",
        zh="尚未设置简报。",
    ),
    "now": Text(
        en="Preparing your brief now…",
        zh="正在准备你的简报…",
    ),
    "paused_reply": Text(
        en="Brief paused.",
        zh="简报已暂停。",
    ),
    "resumed_reply": Text(
        en="Brief resumed.",
        zh="简报已恢复。",
    ),
    "zone_set": Text(
        en="This chat's time zone is now {zone}. New briefs use it; existing ones keep theirs (set them again to move them).",
        zh="本对话的时区已设为 {zone}。新的简报使用它；已有的简报保持原时区（重新设置即可改用新时区）。",
    ),
    "paused": Text(
        en="paused",
        zh="已暂停",
    ),
    "next": Text(
        en="next {when}",
        zh="下次 {when}",
    ),
    "last": Text(
        en="last: {status}",
        zh="上次：{status}",
    ),
    "status_delivered": Text(
        en="delivered",
        zh="已送达",
    ),
    "status_failed": Text(
        en="failed",
        zh="失败",
    ),
    "status_interrupted": Text(
        en="interrupted",
        zh="被中断",
    ),
    "status_skipped": Text(
        en="skipped {date}: market closed",
        zh="已跳过 {date}（休市）",
    ),
    "status_missed": Text(
        en="missed {when}: tapebot was not running",
        zh="错过 {when}（tapebot 未运行）",
    ),
    "err_unknown_zone": Text(
        en="unknown time zone {name!r}; use an IANA name such as Asia/Shanghai, Europe/London or America/New_York",
        zh="未知时区“{name}”；请使用 IANA 名称，如 Asia/Shanghai、Europe/London 或 America/New_York",
    ),
    "err_two_day_sets": Text(
        en="two day sets in {text!r}; use one of daily, weekdays, trading_days",
        zh="“{text}”中有两个日期集合；请只用 daily、weekdays、trading_days 之一",
    ),
    "err_bad_time": Text(
        en="bad time in {text!r}; use HH:MM, 24-hour, e.g. 08:30",
        zh="“{text}”中的时间无效；请用 24 小时制 HH:MM，如 08:30",
    ),
    "err_not_understood": Text(
        en="did not understand {token!r} in {text!r}",
        zh="看不懂“{text}”中的“{token}”",
    ),
    "err_needs_time": Text(
        en="a brief needs a time, e.g. 08:30, 'weekdays 21:00' or 'trading_days 08:30 Asia/Shanghai'",
        zh="简报需要一个时间，如 08:30、weekdays 21:00 或 trading_days 08:30 Asia/Shanghai",
    ),
    "err_needs_zone": Text(
        en="give a zone, e.g. /brief tz Asia/Shanghai",
        zh="请给出时区，如 /brief tz Asia/Shanghai",
    ),
    "err_too_many": Text(
        en="this chat already has {n} schedules; delete one first",
        zh="本对话已有 {n} 个定时任务；请先删除一个",
    ),
    "err_not_found": Text(
        en="no schedule {id!r} in this chat",
        zh="本对话没有定时任务 {id}",
    ),
    "err_no_scheduler": Text(
        en="the scheduler is not running in this process",
        zh="本进程中没有运行调度器",
    ),
}

_WEEKDAYS_ZH = "一二三四五六日"
_SKIPPED = re.compile(r"^skipped (?P<date>\S+): market closed$")
_MISSED = re.compile(r"^missed (?P<when>.+): tapebot was not running$")


def say(lang: str, key: str, **kw: Any) -> str:
    return _say(SCHEDULE_STRINGS, lang, key, **kw)


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
    if key and f"err_{key}" in SCHEDULE_STRINGS:
        return say(lang, f"err_{key}", **getattr(exc, "params", {}))
    return str(exc)
