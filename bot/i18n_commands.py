"""The words of command replies (`bot/commands/`), merged into bot/i18n.STRINGS. The commands'
own descriptions live with their definitions (`CommandSpec`), one per command."""

from __future__ import annotations

from agent.texts import Text

COMMAND_STRINGS: dict[str, Text] = {
    "help_head": Text(
        en="Commands:",
        zh="命令：",
    ),
    "help_foot": Text(
        en="For anything else just write to me, e.g. “analyze 600519”.",
        zh="其他事情直接发消息给我即可，例如“分析 600519”。",
    ),
    "help_group_session": Text(
        en="Conversation",
        zh="对话",
    ),
    "help_group_approvals": Text(
        en="Approvals",
        zh="确认",
    ),
    "help_group_background": Text(
        en="Background tasks and briefs",
        zh="后台任务与简报",
    ),
    "help_group_memory": Text(
        en="Memory",
        zh="记忆",
    ),
    "help_group_skills": Text(
        en="Skills (/skills for details)",
        zh="技能（/skills 查看详情）",
    ),
    "tasks_off": Text(
        en="Background tasks are not available here.",
        zh="此处不支持后台任务。",
    ),
    "tasks_none": Text(
        en="No background tasks in this conversation.",
        zh="本对话没有后台任务。",
    ),
    "tasks_hint": Text(
        en="Details: /tasks show <id> · stop one: /tasks cancel <id>",
        zh="详情：/tasks show <id> · 取消：/tasks cancel <id>",
    ),
    "tasks_cancelled": Text(
        en="Cancelled {id}.",
        zh="已取消 {id}。",
    ),
    "tasks_not_running": Text(
        en="No running task {id} here.",
        zh="这里没有正在运行的任务 {id}。",
    ),
    "tasks_unknown": Text(
        en="No task {id} in this chat.",
        zh="本对话没有任务 {id}。",
    ),
    "tasks_usage": Text(
        en="Usage: /tasks · /tasks show <id> · /tasks cancel <id>",
        zh="用法：/tasks · /tasks show <id> · /tasks cancel <id>",
    ),
    "task_error": Text(
        en="Error: {error}",
        zh="错误：{error}",
    ),
    "task_result": Text(
        en="Result:\n{result}",
        zh="结果：\n{result}",
    ),
    "briefs_off": Text(
        en="Scheduled briefs are turned off ([scheduler] enabled = false).",
        zh="定时简报已关闭（[scheduler] enabled = false）。",
    ),
    "brief_usage_discord": Text(
        en="Usage: /brief set time:08:30 (days:weekdays, zone:Asia/Shanghai optional) · /brief now · /brief pause · /brief resume · /brief off · /brief tz zone:<zone>",
        zh="用法：/brief set time:08:30（可选 days:weekdays 工作日、zone:Asia/Shanghai 时区）· /brief now（立即）· /brief pause（暂停）· /brief resume（恢复）· /brief off（关闭）· /brief tz zone:<时区>",
    ),
    "skills_none": Text(
        en="No skills are installed.",
        zh="没有安装任何技能。",
    ),
    "skills_head": Text(
        en="Skills (send /<name>, optionally with what to focus on):",
        zh="技能（发送 /<名称>，可附上关注点）：",
    ),
    "skill_gone": Text(
        en="The skill {name} is no longer installed.",
        zh="技能 {name} 已不再安装。",
    ),
    "status_calendar": Text(
        en="Market calendar: {warning}",
        zh="交易日历：{warning}",
    ),
    "status_tasks": Text(
        en="Running tasks: {tasks}",
        zh="运行中的后台任务：{tasks}",
    ),
}
