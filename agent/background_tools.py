"""The chat- and model-facing side of background tasks: the notification injected when a task
ends, the `/tasks` line, the executor's submit port and the `check_background_tasks` tool."""

from __future__ import annotations

import html
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from agent.background_tasks import TaskManager
from agent.errors import ToolFailed
from agent.task_ledger import ACTIVE, TaskRecord
from agent.texts import Text
from agent.tools.registry import ProgressFn, Tool, ToolContext, Toolset

PREVIEW_CHARS = 1_500


# ---- texts for the chat and the model ---------------------------------------------------------
# What a chat sees of a task (`/tasks`, /status, the progress message) in its language; agent sits
# below bot/, so the words are here. The notification for the model stays English.
TASK_WORDS: dict[str, Text] = {
    "queued": Text(
        en="queued",
        zh="排队中",
    ),
    "running": Text(
        en="running",
        zh="运行中",
    ),
    "succeeded": Text(
        en="succeeded",
        zh="已完成",
    ),
    "failed": Text(
        en="failed",
        zh="失败",
    ),
    "cancelled": Text(
        en="cancelled",
        zh="已取消",
    ),
    "timed_out": Text(
        en="timed out",
        zh="超时",
    ),
    "lost": Text(
        en="lost",
        zh="已丢失",
    ),
    "secs": Text(
        en="{s}s",
        zh="{s} 秒",
    ),
    "mins": Text(
        en="{m}m {s:02d}s",
        zh="{m} 分 {s:02d} 秒",
    ),
    "hours": Text(
        en="{h}h {m:02d}m",
        zh="{h} 小时 {m:02d} 分",
    ),
}


def task_word(lang: str, key: str) -> str:
    """A task status (or duration pattern) in `lang`; an unknown status is shown as it is."""
    text = TASK_WORDS.get(key)
    return text.pick(lang) if text is not None else key.replace("_", " ")


def _duration(seconds: float | None, lang: str = "en") -> str:
    if seconds is None:
        return ""
    s = round(seconds)
    if s < 60:
        return task_word(lang, "secs").format(s=s)
    if s < 3600:
        return task_word(lang, "mins").format(m=s // 60, s=s % 60)
    return task_word(lang, "hours").format(h=s // 3600, m=s % 3600 // 60)


def task_notification_text(record: TaskRecord, *, preview_chars: int = PREVIEW_CHARS) -> str:
    """The message injected into the session when a task finishes. Free text (result, error) is
    escaped so tool output can never close the block or forge a second notification."""
    e = html.escape
    took = _duration(record.elapsed())
    if record.status == "succeeded":
        summary = f"{record.tool_name} finished" + (f" in {took}" if took else "")
    elif record.status == "lost":
        summary = f"{record.tool_name} was lost: {record.error}"
    else:
        summary = f"{record.tool_name} {record.status.replace('_', ' ')}" + (
            f": {record.error}" if record.error else ""
        )
    lines = [
        "[SYSTEM NOTIFICATION - NOT USER INPUT]",
        "<task-notification>",
        f"<task-id>{e(record.id)}</task-id>",
        f"<tool>{e(record.tool_name)}</tool>",
        f"<status>{record.status}</status>",
        f"<summary>{e(summary)}</summary>",
    ]
    if record.result:
        preview = record.result[:preview_chars]
        more = len(record.result) - len(preview)
        if more > 0:
            preview += f"\n… ({more:,} more characters)"
        lines.append(f"<result-preview>\n{e(preview)}\n</result-preview>")
    if record.attachments:
        lines.append(f"<attachments>{len(record.attachments)} file(s) for the user</attachments>")
    lines.append(
        f'<result-ref>{record.ref} — call check_background_tasks(task_id="{e(record.id)}") for the full result'
        "</result-ref>"
    )
    lines.append("</task-notification>")
    lines.append(
        "This is an automatic notice, not a message from the user. Tell the user in this chat what the "
        "task found (or why it did not finish), briefly."
    )
    return "\n".join(lines)


def describe_task(record: TaskRecord, now: datetime | None = None, *, lang: str = "en") -> str:
    """One line for `/tasks`, in the chat's language."""
    line = f"{record.id} · {record.tool_name} · {task_word(lang, record.status)}"
    if record.status == "running":
        if record.stage:
            line += f" · {record.stage}"
        if record.percent is not None:
            line += f" {record.percent:.0f}%"
    took = _duration(record.elapsed(now), lang)
    if took:
        line += f" · {took}"
    if record.error and record.status != "succeeded":
        line += f" · {record.error[:120]}"
    return line


# ---- runtime integration ----------------------------------------------------------------------
async def run_background_call(
    manager: TaskManager, ctx: ToolContext, tool: Tool, arguments: dict[str, Any]
) -> dict[str, Any]:
    """Submit a `background=True` tool call; returns what the model sees right away. Arguments are
    validated first, so an invalid call never enters the ledger (InvalidToolArguments propagates)."""
    tool.validate(arguments)

    async def work(progress: ProgressFn) -> Any:
        return await tool.call(replace(ctx, _progress=progress), arguments)

    record = await manager.submit(
        ctx.session_id,
        ctx.chat_key,
        tool.name,
        ctx.call_id,
        work,
        arguments=arguments,
        timeout=tool.spec.timeout,
    )
    state = "started" if record.status == "running" else "queued (other tasks are running)"
    return {
        "status": "background",
        "task_id": record.id,
        "message": (
            f"{tool.name} {state} in the background as {record.id}. The result will be posted to this chat "
            "automatically when it finishes; tell the user it is running and carry on. Use "
            "check_background_tasks to look at its progress — do not wait for it or start it again."
        ),
    }


@dataclass
class BackgroundSubmitter:
    """Adapts a TaskManager to the executor's `BackgroundRunner` port."""

    manager: TaskManager

    async def submit(self, ctx: ToolContext, tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
        return await run_background_call(self.manager, ctx, tool, arguments)


background_tools = Toolset("background")


def _view(record: TaskRecord, *, full: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"task_id": record.id, "tool": record.tool_name, "status": record.status}
    if record.stage:
        out["stage"] = record.stage
    if record.detail and record.status in ACTIVE:
        out["detail"] = record.detail
    if record.percent is not None and record.status in ACTIVE:
        out["percent"] = round(record.percent, 1)
    took = record.elapsed()
    if took is not None:
        out["elapsed_s"] = round(took, 1)
    if record.error:
        out["error"] = record.error
    if record.result is not None:
        out["result"] = record.result if full else record.result[:200]
    if record.attachments and full:
        out["attachments"] = [a.path for a in record.attachments]
    return out


@background_tools.tool(concurrency_safe=True)
async def check_background_tasks(ctx: ToolContext, task_id: str | None = None) -> dict[str, Any]:
    """Check background tasks started in this chat: status, progress and, once finished, the result.

    Finished tasks also report back on their own, so there is no need to poll in a loop.

    Args:
        task_id: a task id such as bg_1a2b3c4d5e; omit it to list this chat's recent tasks.
    """
    manager = ctx.deps.get(TaskManager)

    def visible(rec: TaskRecord) -> bool:
        return rec.session_id == ctx.session_id or bool(ctx.chat_key and rec.chat_key == ctx.chat_key)

    if task_id:
        record = await manager.get(task_id.strip())
        if record is None or not visible(record):
            raise ToolFailed(f"no background task {task_id!r} in this chat")
        return _view(record, full=True)
    records = await manager.list(ctx.session_id, limit=10)
    if not records:
        return {"tasks": [], "note": "no background tasks in this chat"}
    return {"tasks": [_view(r, full=False) for r in records]}
