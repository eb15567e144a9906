"""Commands for background tasks, schedules and skills (issues 5 and 7)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from adapters.base import InboundCommand
from bot.chats import ChatState

if TYPE_CHECKING:
    from bot.gateway import Gateway


def install(gateway: Gateway, app: Any) -> None:
    """Register /tasks, /brief, /skills and one command per skill on the gateway."""
    from agent.background_tools import describe_task
    from agent.skills import skill_commands, skill_turn_text

    async def cmd_tasks(gw: Gateway, state: ChatState, cmd: InboundCommand) -> None:
        manager = app.task_manager
        argv = cmd.argv
        if argv[:1] == ["cancel"] and len(argv) > 1:
            record = await manager.cancel(argv[1], session_id=state.session_id)
            await gw.say(state, f"cancelled {argv[1]}" if record else f"no running task {argv[1]} here")
            return
        if argv[:1] == ["show"] and len(argv) > 1:
            record = await manager.get(argv[1])
            if record is None or record.chat_key != state.key:
                await gw.say(state, f"no task {argv[1]} in this chat")
                return
            detail = describe_task(record)
            if record.error:
                detail += f"\nerror: {record.error}"
            if record.result is not None:
                detail += f"\nresult: {str(record.result)[:1500]}"
            await gw.say(state, detail)
            return
        records = await manager.list(state.session_id)
        lines = [describe_task(r) for r in records] or ["no background tasks in this conversation"]
        await gw.say(state, "\n".join(lines) + "\n\n/tasks show <id> · /tasks cancel <id>")

    async def cmd_brief(gw: Gateway, state: ChatState, cmd: InboundCommand) -> None:
        reply = await app.schedules.handle_brief_command(state.key, cmd.user.user_id, cmd.args)
        await gw.say(state, reply)

    async def cmd_skills(gw: Gateway, state: ChatState, cmd: InboundCommand) -> None:
        lines = [f"/{s.name} — {s.description}" for s in app.skills.skills.values()]
        await gw.say(state, "\n".join(lines) or "no skills")

    gateway.commands.update({"tasks": cmd_tasks, "brief": cmd_brief, "skills": cmd_skills})
    gateway.command_help.update(
        {
            "tasks": "Background tasks: list, show <id>, cancel <id>",
            "brief": "Daily brief: /brief 08:30 [Asia/Shanghai] · weekdays 21:00 · off · now",
            "skills": "List skills",
        }
    )

    def skill_handler(name: str) -> Any:
        async def run(gw: Gateway, state: ChatState, cmd: InboundCommand) -> None:
            skill = app.skills.get(name)
            if skill is None:
                await gw.say(state, f"the skill {name} is gone")
                return
            gw.run_skill(state, skill_turn_text(skill, cmd.args), cmd.user)

        return run

    for name, description in skill_commands(app.skills.skills):
        if name not in gateway.commands:
            gateway.commands[name] = skill_handler(name)
            gateway.command_help[name] = description


async def status_extra(app: Any, state: ChatState, now: datetime | None = None) -> str:
    lines = []
    if getattr(app, "market", None) is not None and (warn := app.market.calendar_warning(now)):
        lines.append(f"Market calendar: {warn}")
    if app.task_manager is not None:
        running = [r for r in await app.task_manager.list(state.session_id) if not r.terminal]
        if running:
            lines.append("Tasks: " + ", ".join(f"{r.id} {r.tool_name} {r.status}" for r in running))
    if app.schedules is not None:
        lines += await app.schedules.status_lines(state.key)
    if app.mcp is not None:
        lines += app.mcp.status()
    return "\n".join(lines)
