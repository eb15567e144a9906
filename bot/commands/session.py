"""The conversation's own commands: /start /help /new /clear /cancel /status /model /lang /compact."""

from __future__ import annotations

import logging

from adapters.commandspec import Choice, CommandSpec, OptionSpec, Words
from agent.errors import CompactionFailed
from agent.tokens import estimate_messages
from bot.commands.context import CommandContext
from bot.commands.registry import GROUPS, Command
from bot.i18n import t

log = logging.getLogger(__name__)


async def cmd_start(ctx: CommandContext) -> None:
    await ctx.say(t(ctx.lang, "start"))


async def cmd_help(ctx: CommandContext) -> None:
    """One short message: the commands by group, in the chat's language (no tool names)."""
    by_group: dict[str, list[CommandSpec]] = {}
    for spec in ctx.services.specs():
        by_group.setdefault(spec.group, []).append(spec)
    lines = [t(ctx.lang, "help_head")]
    for group in GROUPS:
        specs = by_group.get(group)
        if not specs:
            continue
        lines.append("")
        lines.append(t(ctx.lang, f"help_group_{group}"))
        if group == "skills":  # many, with long descriptions: their names only
            lines.append(" ".join(f"/{s.name}" for s in specs))
        else:
            lines += [f"/{s.name} — {s.description.get(ctx.lang)}" for s in specs]
    lines += ["", t(ctx.lang, "help_foot")]
    await ctx.say("\n".join(lines))


async def cmd_new(ctx: CommandContext) -> None:
    ctx.turn.stop_running()
    await ctx.services.runtime.end_session(ctx.session_id)
    await ctx.settings.new_session()
    await ctx.say(t(ctx.lang, "new_session"))


async def cmd_clear(ctx: CommandContext) -> None:
    ctx.turn.stop_running()
    await ctx.services.runtime.end_session(ctx.session_id)
    await ctx.services.store.replace_messages(ctx.session_id, [])
    await ctx.say(t(ctx.lang, "cleared"))


async def cmd_cancel(ctx: CommandContext) -> None:
    if ctx.turn.is_running():
        ctx.turn.stop_running()
        await ctx.say(t(ctx.lang, "cancelled"))
        return
    waiting = await ctx.turn.waiting()
    if waiting is not None:
        if not ctx.turn.may_close(waiting):  # a member never closes an admin's card
            await ctx.say(t(ctx.lang, "approval_not_allowed"))
            return
        await ctx.turn.close_waiting(waiting)
        await ctx.say(t(ctx.lang, "cancelled"))
        return
    await ctx.say(t(ctx.lang, "nothing_to_cancel"))


async def cmd_model(ctx: CommandContext) -> None:
    services = ctx.services
    models = ", ".join(services.models)
    wanted = ctx.args.strip()
    if not wanted:
        await ctx.say(t(ctx.lang, "model_current", model=ctx.current_model, models=models))
        return
    if wanted not in services.models:
        await ctx.say(t(ctx.lang, "model_unknown", model=wanted[:40], models=models))
        return
    await ctx.settings.set_model(None if wanted == services.default_model else wanted)
    await ctx.say(t(ctx.lang, "model_switched", model=wanted))


async def cmd_lang(ctx: CommandContext) -> None:
    wanted = ctx.args.strip().lower()[:2]
    if wanted not in ("en", "zh"):
        await ctx.say(t(ctx.lang, "lang_usage"))
        return
    await ctx.settings.set_lang(wanted)
    await ctx.say(t(wanted, "lang_set"))


async def cmd_status(ctx: CommandContext) -> None:
    store = ctx.services.store
    messages = await store.load_messages(ctx.session_id)
    waiting = await ctx.turn.waiting()
    approvals = question = "—"
    if waiting is not None and waiting.waiting is not None:
        w = waiting.waiting
        if w.kind == "approval":
            approvals = f"{w.confirmation_target.tool} ({w.confirmation_target.approval_id})"
        else:
            question = w.question[:80]
    text = t(
        ctx.lang,
        "status",
        model=ctx.current_model,
        session=ctx.session_id,
        messages=len(messages),
        tokens=f"{estimate_messages(messages):,}",
        window=f"{ctx.services.context_window(ctx.model):,}",
        running=t(ctx.lang, "yes" if ctx.turn.is_running() else "no"),
        approvals=approvals,
        question=question,
    )
    open_turn = await store.open_turn(ctx.session_id)
    if open_turn is not None and open_turn.plan:
        text += (
            "\n" + t(ctx.lang, "plan") + ": " + "; ".join(f"[{p.status}] {p.text}" for p in open_turn.plan)
        )
    from bot.approval_rules import active_count
    from bot.commands.link import rule_keys

    text += "\n" + t(ctx.lang, "rules_status", n=await active_count(store, await rule_keys(ctx)))
    if ctx.services.status_extra is not None:
        extra = await ctx.services.status_extra(ctx.chat_key, ctx.session_id, ctx.lang)
        if extra:
            text += "\n" + "\n".join(extra)
    await ctx.say(text)


async def cmd_compact(ctx: CommandContext) -> None:
    if ctx.turn.is_running():
        await ctx.say(t(ctx.lang, "busy_try_later"))
        return
    try:
        event = await ctx.services.runtime.compact_now(ctx.session_id, ctx.model)
    except CompactionFailed as exc:
        log.warning("/compact failed in %s: %s", ctx.chat_key, exc)
        await ctx.say(t(ctx.lang, "compact_failed"))
        return
    if event is None:
        await ctx.say(t(ctx.lang, "compact_nothing"))
    else:
        await ctx.say(t(ctx.lang, "compacted", before=event.before_messages, after=event.after_messages))


_S = "session"  # the /help group of this module's commands


LANGUAGE = OptionSpec(
    "language",
    Words("Language", "语言"),
    kind="choice",
    required=True,
    choices=(Choice("en", Words("English", "英文")), Choice("zh", Words("中文 (Chinese)", "中文"))),
)
MODEL = OptionSpec(
    "model",
    Words("Model id (empty: show the current one)", "模型 ID（留空：查看当前模型）"),
    autocomplete="models",
)

COMMANDS = (
    Command(CommandSpec("start", Words("Introduction", "介绍"), _S), cmd_start),
    Command(CommandSpec("help", Words("List commands", "命令列表"), _S, keeps_waiting=True), cmd_help),
    Command(CommandSpec("new", Words("Start a new conversation", "开始新对话"), _S), cmd_new),
    Command(
        CommandSpec("clear", Words("Clear this conversation", "清空本对话"), _S, admin_only_in_groups=True),
        cmd_clear,
    ),
    Command(
        CommandSpec("cancel", Words("Stop the running turn", "停止当前任务"), _S, keeps_waiting=True),
        cmd_cancel,
    ),
    Command(
        CommandSpec(
            "status",
            Words("Model, context and pending items", "模型、上下文与待处理事项"),
            _S,
            keeps_waiting=True,
        ),
        cmd_status,
    ),
    Command(
        CommandSpec(
            "model",
            Words("Show or switch the model", "查看或切换模型"),
            _S,
            admin_only_in_groups=True,
            options=(MODEL,),
        ),
        cmd_model,
    ),
    Command(
        CommandSpec(
            "lang",
            Words("Switch language (English / 中文)", "切换语言（English / 中文）"),
            _S,
            admin_only_in_groups=True,
            keeps_waiting=True,
            options=(LANGUAGE,),
        ),
        cmd_lang,
    ),
    Command(
        CommandSpec(
            "compact", Words("Compact this conversation's context now", "立即压缩本对话的上下文"), _S
        ),
        cmd_compact,
    ),
)
