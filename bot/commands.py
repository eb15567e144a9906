"""Chat commands shared by Telegram and Discord. Each is a small coroutine taking the gateway,
the chat state and the command; later issues register more (`/memory`, `/brief`, `/tasks`, skills)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from adapters.base import InboundCommand
from bot.chats import ChatState
from bot.i18n import t
from bot.refusals import refusal_key
from bot.rules import active_count, cmd_rules

if TYPE_CHECKING:
    from bot.gateway import Gateway

log = logging.getLogger(__name__)


async def cmd_start(gw: Gateway, state: ChatState, cmd: InboundCommand) -> None:
    await gw.say(state, t(state.lang, "start"))


async def cmd_help(gw: Gateway, state: ChatState, cmd: InboundCommand) -> None:
    text = t(state.lang, "help")
    more = [f"/{name} — {desc}" for name, desc in gw.command_help.items()]
    if more:
        text += "\n" + "\n".join(more)
    if gw.help_extra is not None:
        text += "\n\n" + gw.help_extra(state.lang)
    await gw.say(state, text)


async def cmd_new(gw: Gateway, state: ChatState, cmd: InboundCommand) -> None:
    gw.lane(state).cancel()
    await gw.runtime.end_session(state.session_id)
    await gw.chats.new_session(state)
    await gw.say(state, t(state.lang, "new_session"))


async def cmd_clear(gw: Gateway, state: ChatState, cmd: InboundCommand) -> None:
    gw.lane(state).cancel()
    await gw.runtime.end_session(state.session_id)
    await gw.store.replace_messages(state.session_id, [])
    await gw.say(state, t(state.lang, "cleared"))


async def cmd_cancel(gw: Gateway, state: ChatState, cmd: InboundCommand) -> None:
    lane = gw.lane(state)
    if lane.is_running and lane.cancel():
        await gw.say(state, t(state.lang, "cancelled"))
        return
    waiting = await gw.waiting_turn(state)
    if waiting is not None:
        if not gw.may_close(waiting, cmd.user.user_id):  # a member never closes an admin's card
            await gw.say(state, t(state.lang, "approval_not_allowed"))
            return
        await gw.move_on(state, waiting)
        await gw.say(state, t(state.lang, "cancelled"))
        return
    await gw.say(state, t(state.lang, "nothing_to_cancel"))


async def cmd_model(gw: Gateway, state: ChatState, cmd: InboundCommand) -> None:
    current = state.model or gw.default_model
    wanted = cmd.args.strip()
    if not wanted:
        await gw.say(state, t(state.lang, "model_current", model=current, models=", ".join(gw.models)))
        return
    if wanted not in gw.models:
        await gw.say(state, t(state.lang, "model_unknown", model=wanted[:40], models=", ".join(gw.models)))
        return
    state.model = None if wanted == gw.default_model else wanted
    await gw.chats.save(state)
    await gw.say(state, t(state.lang, "model_switched", model=wanted))


async def cmd_lang(gw: Gateway, state: ChatState, cmd: InboundCommand) -> None:
    wanted = cmd.args.strip().lower()[:2]
    if wanted not in ("en", "zh"):
        await gw.say(state, t(state.lang, "lang_usage"))
        return
    state.lang = wanted
    await gw.chats.save(state)
    await gw.say(state, t(state.lang, "lang_set"))


async def cmd_status(gw: Gateway, state: ChatState, cmd: InboundCommand) -> None:
    from agent.tokens import estimate_messages

    messages = await gw.store.load_messages(state.session_id)
    waiting = await gw.waiting_turn(state)
    approvals = question = "—"
    if waiting is not None and waiting.waiting is not None:
        w = waiting.waiting
        if w.kind == "approval":
            approvals = f"{w.confirmation_target.tool} ({w.confirmation_target.approval_id})"
        else:
            question = w.question[:80]
    model = state.model or gw.default_model
    text = t(
        state.lang,
        "status",
        model=model,
        session=state.session_id,
        messages=len(messages),
        tokens=f"{estimate_messages(messages):,}",
        window=f"{gw.context_window(state.model):,}",
        running="yes" if gw.lane(state).is_running else "no",
        approvals=approvals,
        question=question,
    )
    open_turn = await gw.store.open_turn(state.session_id)
    if open_turn is not None and open_turn.plan:
        text += (
            "\n" + t(state.lang, "plan") + ": " + "; ".join(f"[{p.status}] {p.text}" for p in open_turn.plan)
        )
    text += "\n" + t(state.lang, "rules_status", n=await active_count(gw.store, state.key))
    if gw.status_extra is not None:
        extra = await gw.status_extra(state)
        if extra:
            text += "\n" + extra
    await gw.say(state, text)


async def _decide_cmd(gw: Gateway, state: ChatState, cmd: InboundCommand, command: str) -> None:
    approval_id = cmd.args.strip().split(" ")[0] if cmd.args.strip() else ""
    if not approval_id:
        await gw.say(state, t(state.lang, "approval_usage"))
        return
    refused = await gw.decide_by_command(state, cmd.user, approval_id, command)
    if refused is not None:
        await gw.say(state, t(state.lang, refusal_key(refused)))


async def cmd_approve(gw: Gateway, state: ChatState, cmd: InboundCommand) -> None:
    await _decide_cmd(gw, state, cmd, "approve")


async def cmd_deny(gw: Gateway, state: ChatState, cmd: InboundCommand) -> None:
    await _decide_cmd(gw, state, cmd, "deny")


async def cmd_compact(gw: Gateway, state: ChatState, cmd: InboundCommand) -> None:
    if gw.lane(state).is_running:
        await gw.say(state, t(state.lang, "busy_try_later"))
        return
    from agent.errors import CompactionFailed

    try:
        event = await gw.runtime.compact_now(state.session_id, state.model)
    except CompactionFailed as exc:
        log.warning("/compact failed in %s: %s", state.key, exc)
        await gw.say(state, t(state.lang, "compact_failed"))
        return
    if event is None:
        await gw.say(state, t(state.lang, "compact_nothing"))
    else:
        await gw.say(
            state, t(state.lang, "compacted", before=event.before_messages, after=event.after_messages)
        )


async def cmd_memory(gw: Gateway, state: ChatState, cmd: InboundCommand) -> None:
    services = gw.memory
    if services is None:
        await gw.say(state, t(state.lang, "memory_off"))
        return
    from memory.cli import memory_command

    # memories belong to the user; a fresh session (after /new) has no row to tell us yet
    scope = cmd.user.user_id or (
        await services.scope_of(state.session_id) if services.scope_of else "default"
    )
    text = await memory_command(
        services.store,
        services.recall,
        scope,
        cmd.args,
        session_messages=gw.store.load_messages,
        lang=state.lang,
    )
    await gw.say(state, text)


BUILTIN_COMMANDS = {
    "compact": cmd_compact,
    "memory": cmd_memory,
    "start": cmd_start,
    "help": cmd_help,
    "new": cmd_new,
    "clear": cmd_clear,
    "cancel": cmd_cancel,
    "model": cmd_model,
    "lang": cmd_lang,
    "status": cmd_status,
    "approve": cmd_approve,
    "deny": cmd_deny,
    "rules": cmd_rules,
}
