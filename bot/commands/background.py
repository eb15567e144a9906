"""Background work: /tasks, /brief (scheduled briefs), /skills and one command per skill, and the
lines they add to /status."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from adapters.commandspec import Choice, CommandSpec, OptionSpec, SubcommandSpec, Words
from agent.background_tools import describe_task, task_word
from agent.texts import Text
from bot.commands.context import CommandContext, ScheduleOps, SkillOps, TaskOps
from bot.commands.registry import Command
from bot.commands.task_result import result_text
from bot.i18n import t

RESULT_PREVIEW = 1500


async def cmd_tasks(ctx: CommandContext) -> None:
    tasks = ctx.services.tasks
    if tasks is None:
        await ctx.say(t(ctx.lang, "tasks_off"))
        return
    argv, lang = ctx.argv, ctx.lang
    if argv[:1] == ["cancel"] and len(argv) > 1:
        record = await tasks.cancel(argv[1], session_id=ctx.session_id)
        key = "tasks_cancelled" if record else "tasks_not_running"
        await ctx.say(t(lang, key, id=argv[1][:40]))
        return
    if argv[:1] == ["show"] and len(argv) > 1:
        record = await tasks.get(argv[1])
        if record is None or record.chat_key != ctx.chat_key:
            await ctx.say(t(lang, "tasks_unknown", id=argv[1][:40]))
            return
        detail = describe_task(record, lang=lang)
        if record.error:
            detail += "\n" + t(lang, "task_error", error=record.error)
        if record.result is not None:
            detail += "\n" + t(lang, "task_result", result=result_text(record.result, RESULT_PREVIEW))
        await ctx.say(detail)
        return
    if argv and argv != ["list"]:
        await ctx.say(t(lang, "tasks_usage"))
        return
    records = await tasks.list(ctx.session_id)
    lines = [describe_task(r, lang=lang) for r in records] or [t(lang, "tasks_none")]
    await ctx.say("\n".join(lines) + "\n\n" + t(lang, "tasks_hint"))


async def cmd_brief(ctx: CommandContext) -> None:
    schedules = ctx.services.schedules
    if schedules is None:
        await ctx.say(t(ctx.lang, "briefs_off"))
        return
    reply = await schedules.handle_brief_command(ctx.chat_key, ctx.user.user_id, ctx.args, lang=ctx.lang)
    if ctx.chat.platform == "discord":  # its slash command takes named options, not "/brief 08:30"
        from scheduler.i18n import say

        reply = reply.replace(say(ctx.lang, "usage"), t(ctx.lang, "brief_usage_discord"))
    await ctx.say(reply)


def skill_description(name: str, description: str) -> Words:
    """A built-in skill's description in each language; another skill's as its author wrote it."""
    text = _SKILL.get(name)
    if text is None:
        return Words(description, description)
    return Words(text.en, text.zh)


async def cmd_skills(ctx: CommandContext) -> None:
    skills = ctx.services.skills
    if skills is None or not skills.skills:
        await ctx.say(t(ctx.lang, "skills_none"))
        return
    lines = [t(ctx.lang, "skills_head")]
    for s in skills.skills.values():
        lines.append(f"/{s.name} — {skill_description(s.name, s.description).get(ctx.lang)}")
    await ctx.say("\n".join(lines))


def skill_command(name: str, description: str) -> Command:
    """/checkup …: the skill's instructions become this turn's message."""

    async def run(ctx: CommandContext) -> None:
        from agent.skills import skill_turn_text

        skill = ctx.services.skills.get(name) if ctx.services.skills is not None else None
        if skill is None:
            await ctx.say(t(ctx.lang, "skill_gone", name=name))
            return
        ctx.turn.run_skill(skill_turn_text(skill, ctx.args))

    focus = OptionSpec("focus", Words("What to focus on (optional)", "关注点（可选）"))
    return Command(CommandSpec(name, skill_description(name, description), "skills", options=(focus,)), run)


def skill_commands(skills: SkillOps) -> list[Command]:
    from agent.skills import skill_commands as menu

    return [skill_command(name, description) for name, description in menu(skills.skills)]


class CalendarWarning(Protocol):
    """The market calendar's range warning for a time (None: now), in a language; None if none."""

    def __call__(self, now: datetime | None = None, *, lang: str = "en") -> str | None: ...


@dataclass
class StatusExtras:
    """The lines background work adds to /status: the market calendar's warning, running tasks,
    briefs and the MCP servers' lines (`mcp_status(lang)`); each None when not running."""

    calendar_warning: CalendarWarning | None = None
    tasks: TaskOps | None = None
    schedules: ScheduleOps | None = None
    mcp_status: Callable[[str], list[str]] | None = None
    #: the market data's dates with their ages, in a language (`MarketServices` via bot/parts.py)
    data_dates: Callable[[str, datetime | None], Awaitable[str | None]] | None = None

    async def __call__(
        self, chat_key: str, session_id: str, lang: str, now: datetime | None = None
    ) -> list[str]:
        lines: list[str] = []
        if self.calendar_warning is not None and (warning := self.calendar_warning(now, lang=lang)):
            lines.append(t(lang, "status_calendar", warning=warning))
        if self.data_dates is not None and (dates := await self.data_dates(lang, now)):
            lines.append(dates)
        if self.tasks is not None:
            running = [r for r in await self.tasks.list(session_id) if not r.terminal]
            if running:
                tasks = ", ".join(f"{r.id} {r.tool_name} {task_word(lang, r.status)}" for r in running)
                lines.append(t(lang, "status_tasks", tasks=tasks))
        if self.schedules is not None:
            lines += await self.schedules.status_lines(chat_key, lang=lang)
        if self.mcp_status is not None:
            lines += self.mcp_status(lang)
        return lines


_SKILL: dict[str, Text] = {
    "screen": Text(
        en="Whole-market screen for Wyckoff setups (springs, SOS, LPS)",
        zh="全市场漏斗筛选（威科夫 spring、SOS、LPS）",
    ),
    "checkup": Text(en="Portfolio health check", zh="持仓健康体检"),
    "report": Text(en="In-depth research report on one stock", zh="单只股票的 AI 深度研报"),
    "strategy": Text(en="Attack or defend? Position decisions for today", zh="攻守决策：今天的仓位怎么做"),
    "backtest": Text(en="Backtest a strategy on history (A-share rules)", zh="策略回测（按 A 股规则）"),
    "daily_brief": Text(
        en="The daily brief: holdings, alerts, market, watch list",
        zh="每日简报：持仓、提醒、大盘、自选、纪律",
    ),
}

TASK_ID = OptionSpec("id", Words("The task's id (see /tasks)", "任务 ID（见 /tasks）"), required=True)
ZONE = OptionSpec(
    "zone", Words("Time zone, e.g. Asia/Shanghai", "时区，例如 Asia/Shanghai"), autocomplete="timezones"
)
DAYS = OptionSpec(
    "days",
    Words("Which days", "哪些日子"),
    kind="choice",
    choices=(
        Choice("daily", Words("Every day", "每天")),
        Choice("weekdays", Words("Weekdays (Mon–Fri)", "工作日（周一至周五）")),
        Choice("trading_days", Words("Trading days", "交易日")),
    ),
)
_BRIEF_SUBCOMMANDS: Sequence[SubcommandSpec] = (
    SubcommandSpec("show", Words("The brief's schedule", "查看简报时间")),
    SubcommandSpec(
        "set",
        Words("Set the time (and days, zone)", "设置时间（及日子、时区）"),
        (
            OptionSpec(
                "time", Words("HH:MM, 24-hour, e.g. 08:30", "HH:MM，24 小时制，例如 08:30"), required=True
            ),
            DAYS,
            ZONE,
        ),
        word="",  # "/brief 08:30 weekdays": the spec itself
    ),
    SubcommandSpec("now", Words("Prepare a brief now", "立即生成一份简报")),
    SubcommandSpec("pause", Words("Pause the brief", "暂停简报")),
    SubcommandSpec("resume", Words("Resume the brief", "恢复简报")),
    SubcommandSpec("off", Words("Turn the brief off", "关闭简报")),
    SubcommandSpec(
        "tz",
        Words("Set this chat's time zone", "设置本对话的时区"),
        (OptionSpec(ZONE.name, ZONE.description, required=True, autocomplete="timezones"),),
    ),
)

COMMANDS = (
    Command(
        CommandSpec(
            "tasks",
            Words("Background tasks: list, show, cancel", "后台任务：查看、详情、取消"),
            "background",
            subcommands=(
                SubcommandSpec("list", Words("This conversation's tasks", "本对话的任务")),
                SubcommandSpec("show", Words("One task's result", "一个任务的结果"), (TASK_ID,)),
                SubcommandSpec("cancel", Words("Cancel a running task", "取消正在运行的任务"), (TASK_ID,)),
            ),
        ),
        cmd_tasks,
    ),
    Command(
        CommandSpec(
            "brief",
            Words("Daily brief: time, days, zone, now, off", "每日简报：时间、日子、时区、立即、关闭"),
            "background",
            admin_only_in_groups=True,
            subcommands=tuple(_BRIEF_SUBCOMMANDS),
        ),
        cmd_brief,
    ),
    Command(CommandSpec("skills", Words("List skills", "技能列表"), "skills"), cmd_skills),
)
