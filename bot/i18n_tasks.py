"""What a chat sees of background tasks and tool failures, in its language. The words
are merged into bot/i18n.STRINGS; the formatters below are what the gateway's task notices
(`notify_task`, `task_progress`) and the turn's progress lines call with the chat's language.

The task *notification* (agent/background_tools.task_notification_text) is a message to the model,
which writes the user's reply in the chat's language: it stays English.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.texts import Text

if TYPE_CHECKING:
    from agent import TaskRecord

# agent.background_tools (and what it loads) is imported by the formatters, not here: bot/i18n.py
# merges this table at import, and the bare table must not cost a start ~0.2 s.

TASK_STRINGS: dict[str, Text] = {
    "brief_empty": Text(
        en="(empty brief)",
        zh="（简报为空）",
    ),
    "brief_header": Text(
        en="🗞 **Daily brief** · {date}",
        zh="🗞 **每日简报** · {date}",
    ),
    "failure_rejected": Text(
        en="rejected",
        zh="被拒绝",
    ),
    "failure_failed": Text(
        en="failed",
        zh="失败",
    ),
    "failure_error": Text(
        en="error",
        zh="出错",
    ),
    "failure_denied": Text(
        en="denied",
        zh="被拒绝执行",
    ),
    "failure_cancelled": Text(
        en="cancelled",
        zh="已取消",
    ),
    "failure_expired": Text(
        en="expired",
        zh="已过期",
    ),
    "failure_tool_error": Text(
        en="error",
        zh="出错",
    ),
    "failure_internal": Text(
        en="did not go through: the bot's database failed (the details are in its log)",
        zh="未能完成：机器人的数据库出错（详情已记入日志）",
    ),
    "failure_invalid_arguments": Text(
        en="invalid arguments",
        zh="参数无效",
    ),
    "failure_tool_not_found": Text(
        en="no such tool",
        zh="没有这个工具",
    ),
    "failure_timed_out": Text(
        en="timed out",
        zh="超时",
    ),
    "failure_aborted": Text(
        en="aborted",
        zh="已中止",
    ),
}


def _say(lang: str, key: str, **kw: Any) -> str | None:
    # this table directly: bot/i18n.py imports this module to merge it, so no import back
    text = TASK_STRINGS.get(key)
    return text.pick(lang).format(**kw) if text is not None else None


def failure_text(lang: str, code: str) -> str:
    """A tool's failure word for its ✗ progress line; an unknown code is shown as it is."""
    return _say(lang, "failure_" + ("cancelled" if code == "canceled" else code)) or code


def task_progress_text(lang: str, record: TaskRecord) -> str:
    """The one message a running task edits: "⏳ backtest · t1: loading 40%"."""
    from agent.background_tools import task_word

    stage = record.stage or task_word(lang, record.status)
    pct = f" {record.percent:.0f}%" if record.percent is not None else ""
    return f"⏳ {record.tool_name} · {record.id}: {stage}{pct} {record.detail or ''}".rstrip()


def task_done_text(lang: str, record: TaskRecord) -> str:
    """That message once the task has ended: "✓ backtest · t1 · succeeded" / "✓ backtest · t1 · 已完成"."""
    from agent.background_tools import task_word

    mark = "✓" if record.status == "succeeded" else "✗"
    return f"{mark} {record.tool_name} · {record.id} · {task_word(lang, record.status)}"
