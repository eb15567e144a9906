"""Approvals by text and standing approvals: /approve /deny /rules."""

from __future__ import annotations

from adapters.commandspec import CommandSpec, OptionSpec, SubcommandSpec, Words
from bot.approval_rules import rules_command
from bot.commands.context import CommandContext
from bot.commands.link import rule_keys
from bot.commands.registry import Command
from bot.i18n import t
from bot.refusals import refusal_key


async def _decide(ctx: CommandContext, command: str) -> None:
    approval_id = ctx.argv[0] if ctx.argv else ""
    if not approval_id:
        await ctx.say(t(ctx.lang, "approval_usage"))
        return
    refused = await ctx.turn.decide(approval_id, command)
    if refused is not None:
        key = refusal_key(refused, group=ctx.chat.is_group, by_id=True)
        await ctx.say(t(ctx.lang, key, id=approval_id))


async def cmd_approve(ctx: CommandContext) -> None:
    await _decide(ctx, "approve")


async def cmd_deny(ctx: CommandContext) -> None:
    await _decide(ctx, "deny")


async def cmd_rules(ctx: CommandContext) -> None:
    # admins only in groups: the gateway checks the spec before calling
    await ctx.say(await rules_command(ctx.services.store, await rule_keys(ctx), ctx.args, ctx.lang))


APPROVAL_ID = OptionSpec("id", Words("The approval's id (on its card)", "确认卡片上的 ID"), required=True)
RULE_ID = OptionSpec("id", Words("The rule's id, or “all”", "规则 ID，或 all"), required=True)

COMMANDS = (
    Command(
        CommandSpec(
            "approve",
            Words("Approve by id", "按 ID 批准"),
            "approvals",
            keeps_waiting=True,
            options=(APPROVAL_ID,),
        ),
        cmd_approve,
    ),
    Command(
        CommandSpec(
            "deny", Words("Deny by id", "按 ID 拒绝"), "approvals", keeps_waiting=True, options=(APPROVAL_ID,)
        ),
        cmd_deny,
    ),
    Command(
        CommandSpec(
            "rules",
            Words("Standing approvals: list or revoke", "长期允许规则：查看或撤销"),
            "approvals",
            admin_only_in_groups=True,
            keeps_waiting=True,
            subcommands=(
                SubcommandSpec(
                    "list", Words("List this chat's standing approvals", "列出本对话的长期允许规则")
                ),
                SubcommandSpec("revoke", Words("Revoke one, or all", "撤销一条或全部"), (RULE_ID,)),
            ),
        ),
        cmd_rules,
    ),
)
