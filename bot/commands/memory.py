"""/memory: a user's long-term memories (list, search, forget, trace); the words are memory/cli.py's."""

from __future__ import annotations

from adapters.commandspec import Choice, CommandSpec, OptionSpec, SubcommandSpec, Words
from bot.commands.context import CommandContext
from bot.commands.registry import Command
from bot.i18n import t


async def cmd_memory(ctx: CommandContext) -> None:
    services = ctx.services.memory
    if services is None:
        await ctx.say(t(ctx.lang, "memory_off"))
        return
    from memory.cli import memory_command

    # memories belong to the user's linked account (not in a group), else the user; a fresh
    # session (after /new) has no row to tell us yet
    links = ctx.services.links
    linked = "" if ctx.chat.is_group or links is None else await links.account_of(ctx.user.key)
    scope = (
        linked
        or ctx.user.user_id
        or (await services.scope_of(ctx.session_id) if services.scope_of else "default")
    )
    text = await memory_command(
        services.store,
        services.recall,
        scope,
        ctx.args,
        session_messages=ctx.services.store.load_messages,
        lang=ctx.lang,
    )
    await ctx.say(text)


MEMORY_ID = OptionSpec(
    "id", Words("The memory's number (#id)", "记忆编号（#id）"), kind="integer", required=True
)
TYPES = OptionSpec(
    "type",
    Words("Only this kind", "只看这一类"),
    kind="choice",
    choices=(
        Choice("preference", Words("Preferences", "偏好")),
        Choice("decision", Words("Decisions", "决策")),
        Choice("playbook", Words("Playbooks", "操作手册")),
        Choice("persona", Words("Persona", "画像")),
    ),
)

COMMANDS = (
    Command(
        CommandSpec(
            "memory",
            Words("Your memories: list, search, forget, trace", "你的记忆：查看、搜索、删除、溯源"),
            "memory",
            subcommands=(
                SubcommandSpec("list", Words("The latest memories", "最近的记忆"), (TYPES,)),
                SubcommandSpec(
                    "search",
                    Words("Search your memories", "搜索记忆"),
                    (OptionSpec("query", Words("What to look for", "要找的内容"), required=True),),
                ),
                SubcommandSpec("forget", Words("Delete one memory", "删除一条记忆"), (MEMORY_ID,)),
                SubcommandSpec("trace", Words("Where a memory came from", "一条记忆的来源"), (MEMORY_ID,)),
            ),
        ),
        cmd_memory,
    ),
)
