"""The words of command replies (`bot/commands/`), merged into bot/i18n.STRINGS. The commands'
own descriptions live with their definitions (`CommandSpec`), one per command."""

from __future__ import annotations

COMMAND_STRINGS: dict[str, dict[str, str]] = {
    "en": {
        "help_head": "Commands:",
        "help_foot": "For anything else just write to me, e.g. “analyze 600519”.",
        "help_group_session": "Conversation",
        "help_group_approvals": "Approvals",
        "help_group_background": "Background tasks and briefs",
        "help_group_memory": "Memory",
        "help_group_skills": "Skills (/skills for details)",
        "tasks_off": "Background tasks are not available here.",
        "tasks_none": "No background tasks in this conversation.",
        "tasks_hint": "Details: /tasks show <id> · stop one: /tasks cancel <id>",
        "tasks_cancelled": "Cancelled {id}.",
        "tasks_not_running": "No running task {id} here.",
        "tasks_unknown": "No task {id} in this chat.",
        "tasks_usage": "Usage: /tasks · /tasks show <id> · /tasks cancel <id>",
        "task_error": "Error: {error}",
        "task_result": "Result:\n{result}",
        "briefs_off": "Scheduled briefs are turned off ([scheduler] enabled = false).",
        "brief_usage_discord": "Usage: /brief set time:08:30 (days:weekdays, zone:Asia/Shanghai optional) · "
        "/brief now · /brief pause · /brief resume · /brief off · /brief tz zone:<zone>",
        "skills_none": "No skills are installed.",
        "skills_head": "Skills (send /<name>, optionally with what to focus on):",
        "skill_gone": "The skill {name} is no longer installed.",
        "status_calendar": "Market calendar: {warning}",
        "status_tasks": "Running tasks: {tasks}",
    },
    "zh": {
        "help_head": "命令：",
        "help_foot": "其他事情直接发消息给我即可，例如“分析 600519”。",
        "help_group_session": "对话",
        "help_group_approvals": "确认",
        "help_group_background": "后台任务与简报",
        "help_group_memory": "记忆",
        "help_group_skills": "技能（/skills 查看详情）",
        "tasks_off": "此处不支持后台任务。",
        "tasks_none": "本对话没有后台任务。",
        "tasks_hint": "详情：/tasks show <id> · 取消：/tasks cancel <id>",
        "tasks_cancelled": "已取消 {id}。",
        "tasks_not_running": "这里没有正在运行的任务 {id}。",
        "tasks_unknown": "本对话没有任务 {id}。",
        "tasks_usage": "用法：/tasks · /tasks show <id> · /tasks cancel <id>",
        "task_error": "错误：{error}",
        "task_result": "结果：\n{result}",
        "briefs_off": "定时简报已关闭（[scheduler] enabled = false）。",
        "brief_usage_discord": "用法：/brief set time:08:30（可选 days:weekdays 工作日、zone:Asia/Shanghai 时区）· "
        "/brief now（立即）· /brief pause（暂停）· /brief resume（恢复）· /brief off（关闭）· /brief tz zone:<时区>",
        "skills_none": "没有安装任何技能。",
        "skills_head": "技能（发送 /<名称>，可附上关注点）：",
        "skill_gone": "技能 {name} 已不再安装。",
        "status_calendar": "交易日历：{warning}",
        "status_tasks": "运行中的后台任务：{tasks}",
    },
}
