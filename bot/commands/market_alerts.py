"""/alerts: the chat user's market alerts (list, remove) and watchlist. Setting one is a request to
the agent (`manage_alerts`), which states the exact condition back."""

from __future__ import annotations

from adapters.commandspec import CommandSpec, OptionSpec, SubcommandSpec, Words
from bot.commands.context import CommandContext
from bot.commands.link import book_of
from bot.commands.registry import Command
from bot.i18n import t
from markets.errors import MarketError


async def cmd_alerts(ctx: CommandContext) -> None:
    ops = ctx.services.alerts
    if ops is None:
        await ctx.say(t(ctx.lang, "alerts_off"))
        return
    user = await book_of(ctx.services.links, ctx.chat, ctx.user)
    argv = ctx.argv
    if not argv or argv[0] == "list":
        alerts, watch = await ops.alerts(user), await ops.watchlist(user)
        if not alerts and not watch:
            await ctx.say(t(ctx.lang, "alerts_none"))
            return
        lines = [t(ctx.lang, "alerts_head", n=len(alerts))]
        lines += [f"#{a.id} {a.condition(ctx.lang)}" for a in alerts]
        if watch:
            lines.append(t(ctx.lang, "alerts_watchlist", symbols=", ".join(watch)))
        await ctx.say("\n".join(lines))
        return
    if argv[0] == "remove" and len(argv) == 2 and argv[1].lstrip("#").isdigit():
        try:
            a = await ops.remove(user, int(argv[1].lstrip("#")))
        except MarketError as exc:
            await ctx.say(t(ctx.lang, "alerts_error", error=exc))
            return
        await ctx.say(t(ctx.lang, "alerts_removed", id=a.id, condition=a.condition(ctx.lang)))
        return
    await ctx.say(t(ctx.lang, "alerts_usage"))


ALERT_ID = OptionSpec(
    "id", Words("The alert's number (#id)", "提醒编号（#id）"), kind="integer", required=True
)

COMMANDS = (
    Command(
        CommandSpec(
            "alerts",
            Words("Your price and signal alerts: list, remove", "你的价格与信号提醒：查看、删除"),
            "background",
            subcommands=(
                SubcommandSpec("list", Words("Alerts and the watchlist", "提醒与自选股")),
                SubcommandSpec("remove", Words("Remove one alert", "删除一条提醒"), (ALERT_ID,)),
            ),
        ),
        cmd_alerts,
    ),
)
