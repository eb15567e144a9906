"""What a chat sees of background tasks and tool failures, in its language (issue 18). The words
are merged into bot/i18n.STRINGS; the formatters below are what the gateway's task notices
(`notify_task`, `task_progress`) and the turn's progress lines call with the chat's language.

The task *notification* (agent/background_tools.task_notification_text) is a message to the model,
which writes the user's reply in the chat's language: it stays English.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent import TaskRecord

# agent.background_tools (and what it loads) is imported by the formatters, not here: bot/i18n.py
# merges this table at import, and the bare table must not cost a start ~0.2 s.

TASK_STRINGS: dict[str, dict[str, str]] = {
    "en": {
        "brief_empty": "(empty brief)",
        "brief_header": "🗞 **Daily brief** · {date}",
        # why a tool's progress line ends in ✗ (a tool's reported status or the runtime's error code)
        "failure_rejected": "rejected",
        "failure_failed": "failed",
        "failure_error": "error",
        "failure_denied": "denied",
        "failure_cancelled": "cancelled",
        "failure_expired": "expired",
        "failure_tool_error": "error",
        "failure_internal": "did not go through: the bot's database failed (the details are in its log)",
        "failure_invalid_arguments": "invalid arguments",
        "failure_tool_not_found": "no such tool",
        "failure_timed_out": "timed out",
        "failure_aborted": "aborted",
    },
    "zh": {
        "brief_empty": "（简报为空）",
        "brief_header": "🗞 **每日简报** · {date}",
        "failure_rejected": "被拒绝",
        "failure_failed": "失败",
        "failure_error": "出错",
        "failure_denied": "被拒绝执行",
        "failure_cancelled": "已取消",
        "failure_expired": "已过期",
        "failure_tool_error": "出错",
        "failure_internal": "未能完成：机器人的数据库出错（详情已记入日志）",
        "failure_invalid_arguments": "参数无效",
        "failure_tool_not_found": "没有这个工具",
        "failure_timed_out": "超时",
        "failure_aborted": "已中止",
    },
}


def _say(lang: str, key: str, **kw: Any) -> str | None:
    # this table directly: bot/i18n.py imports this module to merge it, so no import back
    text = (TASK_STRINGS.get(lang) or TASK_STRINGS["en"]).get(key) or TASK_STRINGS["en"].get(key)
    return text.format(**kw) if text is not None else None


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
