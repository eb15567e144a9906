"""Schedule tools for the model: `manage_schedule` (create/list/pause/resume/delete) and
`list_schedules` (read-only).

Approval (reliability-security A19: injected content must not be able to plant a scheduled job):
`manage_schedule` is `requires_approval=True` for every action. The finer rule — gate only turns
that have read fetched content — needs a per-turn taint flag the runtime does not expose yet, so
we fail closed: the user taps "allow" (or "always allow" for this chat) once. Reads go through
`list_schedules`, which needs no approval. Scheduled runs are unattended, so the runtime denies
`manage_schedule` inside a brief; the tool also refuses on its own when `ctx.unattended`.
"""

from __future__ import annotations

from typing import Any, Literal

from agent.errors import ToolDenied, ToolFailed
from agent.tools.registry import ToolContext, Toolset
from scheduler.service import ScheduleService
from scheduler.specs import ScheduleError
from scheduler.store import Schedule

schedule_tools = Toolset("schedule")


def _view(service: ScheduleService, s: Schedule) -> dict[str, Any]:
    nxt = service.next_run(s)
    out: dict[str, Any] = {
        "schedule_id": s.id,
        "kind": s.kind,
        "spec": s.spec,
        "timezone": s.tz,
        "paused": s.paused,
        "next_run": nxt.isoformat() if nxt else None,
    }
    if s.last_status:
        out["last_status"] = s.last_status
    if s.last_error:
        out["last_error"] = s.last_error
    return out


@schedule_tools.tool(requires_approval=True, side_effect="mutating")
async def manage_schedule(
    ctx: ToolContext,
    action: Literal["create", "list", "pause", "resume", "delete"],
    spec: str | None = None,
    timezone: str | None = None,
    schedule_id: str | None = None,
) -> dict[str, Any]:
    """Create, pause, resume or delete this chat's daily briefs (a brief is an automatic market and
    portfolio summary delivered into this chat). Use list_schedules to just look.

    Args:
        action: create, list, pause, resume or delete.
        spec: for create: "08:30", "weekdays 21:00" or "trading_days 08:30" (24-hour local time).
        timezone: for create: an IANA zone such as Asia/Shanghai; defaults to the chat's zone.
        schedule_id: for pause, resume and delete: the id shown by list_schedules.
    """
    if ctx.unattended:
        raise ToolDenied("schedules cannot be changed from an unattended run; ask the user in chat")
    service = ctx.deps.get(ScheduleService)
    try:
        if action == "list":
            return {"schedules": [_view(service, s) for s in await service.list(ctx.chat_key)]}
        if action == "create":
            if not spec:
                raise ToolFailed('create needs spec, e.g. "08:30" or "trading_days 08:30"')
            created = await service.create(ctx.chat_key, spec, created_by=ctx.user_id, timezone=timezone)
            return {"created": _view(service, created)}
        if not schedule_id:
            raise ToolFailed(f"{action} needs schedule_id (see list_schedules)")
        if action == "pause":
            return {"paused": _view(service, await service.pause(ctx.chat_key, schedule_id))}
        if action == "resume":
            return {"resumed": _view(service, await service.resume(ctx.chat_key, schedule_id))}
        deleted = await service.delete(ctx.chat_key, schedule_id)
        return {"deleted": deleted.id}
    except ScheduleError as exc:
        raise ToolFailed(str(exc)) from exc


@schedule_tools.tool(concurrency_safe=True)
async def list_schedules(ctx: ToolContext) -> dict[str, Any]:
    """List this chat's scheduled briefs with their next run and last outcome."""
    service = ctx.deps.get(ScheduleService)
    return {"schedules": [_view(service, s) for s in await service.list(ctx.chat_key)]}
