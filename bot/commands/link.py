"""/link and /unlink: one person's identities on Telegram, Discord and the terminal share one
account (memory/links.py). `/link` lists the links and gives a one-time code; `/link CODE` in
another chat shows whom it would link with; `/link CODE yes` links them. Groups cannot link."""

from __future__ import annotations

from adapters.base import ChatRef, UserRef
from adapters.commandspec import Choice, CommandSpec, OptionSpec, Words
from agent.approval import standing_keys
from agent.errors import LinkCodeExpired, LinkCodeInvalid, LinkError, LinkNotAllowed, LinkRateLimited
from bot.chats import group_account
from bot.commands.context import CommandContext, LinkOps
from bot.commands.registry import Command
from bot.i18n import t
from memory.links import Identity, identity_key

PLATFORM_NAMES = {"telegram": "Telegram", "discord": "Discord"}
CONFIRM_WORDS = frozenset({"yes", "y", "confirm", "是", "确认"})


def identity_label(identity: str, name: str, lang: str) -> str:
    """How an identity is shown: "Telegram Alice (111)", "the terminal"."""
    platform, _, user_id = identity.partition(":")
    if platform == "terminal":
        return t(lang, "identity_terminal")
    who = f"{name} ({user_id})" if name and name != user_id else user_id
    return t(lang, "identity_of", platform=PLATFORM_NAMES.get(platform, platform), name=who)


def link_error(exc: LinkError, lang: str) -> str:
    if isinstance(exc, LinkRateLimited):
        return t(lang, "link_rate_limited", minutes=max(1, round(exc.retry_after / 60)))
    if isinstance(exc, LinkCodeExpired):
        return t(lang, "link_expired")
    if isinstance(exc, LinkNotAllowed):
        return t(lang, f"link_{exc.reason}")
    if isinstance(exc, LinkCodeInvalid):
        return t(lang, "link_invalid")
    return t(lang, "link_usage")


async def book_of(links: LinkOps | None, chat: ChatRef, user: UserRef) -> str:
    """The account a command acts on, as a turn in this chat would (bot/lanes.py, agent/runtime.py):
    a group's own; else the user's linked account; else the user's own."""
    account = group_account(chat)
    if not account and links is not None:
        account = await links.account_of(identity_key(user.platform, user.user_id))
    return account or user.user_id or "default"


async def rule_keys(ctx: CommandContext) -> tuple[str, ...]:
    """Where this chat's standing approvals are kept (agent.approval.standing_keys): a linked
    user's account as well as the chat."""
    links = ctx.services.links
    account = "" if ctx.chat.is_group or links is None else await links.account_of(ctx.user.key)
    return standing_keys(ctx.chat_key, account)


async def _links_here(ctx: CommandContext) -> LinkOps | None:
    """The link service, if linking is on and this is not a group; else says why not."""
    links = ctx.services.links
    if links is None:
        await ctx.say(t(ctx.lang, "link_off"))
    elif ctx.chat.is_group:
        await ctx.say(t(ctx.lang, "link_group"))
    else:
        return links
    return None


async def cmd_link(ctx: CommandContext) -> None:
    links = await _links_here(ctx)
    if links is None:
        return
    me = Identity(ctx.user.platform, ctx.user.user_id, ctx.user.display_name or ctx.user.username or "")
    argv = ctx.argv
    if len(argv) > 2 or (len(argv) == 2 and argv[1].lower() not in CONFIRM_WORDS):
        await ctx.say(t(ctx.lang, "link_usage"))
        return
    if not argv:
        await ctx.say(await overview(links, me, ctx.lang))
        return
    try:
        offer = await links.peek(argv[0], me)
        other = identity_label(offer.identity, offer.name, ctx.lang)
        if len(argv) == 1:
            mine = identity_label(me.key, me.name, ctx.lang)
            await ctx.say(t(ctx.lang, "link_preview", me=mine, other=other, code=argv[0]))
            return
        await links.redeem(argv[0], me)
    except LinkError as exc:
        await ctx.say(link_error(exc, ctx.lang))
        return
    await ctx.say(t(ctx.lang, "link_done", other=other))


async def overview(links: LinkOps, me: Identity, lang: str) -> str:
    """Who `me` is linked with, and a fresh code to link one more."""
    members = await links.members(me.key)
    head = (
        t(lang, "link_members", names=", ".join(identity_label(m.identity, m.name, lang) for m in members))
        if members
        else t(lang, "link_none")
    )
    code, until = await links.issue(me)
    return head + "\n\n" + t(lang, "link_code", code=code, until=until.strftime("%H:%M"))


async def cmd_unlink(ctx: CommandContext) -> None:
    links = await _links_here(ctx)
    if links is None:
        return
    try:
        await links.unlink(identity_key(ctx.user.platform, ctx.user.user_id))
    except LinkError:
        await ctx.say(t(ctx.lang, "unlink_none"))
        return
    await ctx.say(t(ctx.lang, "unlink_done"))


CODE = OptionSpec(
    "code", Words("The code /link gave in your other chat", "在另一个对话中 /link 得到的关联码")
)
CONFIRM = OptionSpec(
    "confirm",
    Words("Link now (after checking whom the code links)", "确认关联（先看清关联的是谁）"),
    kind="choice",
    choices=(Choice("yes", Words("Yes, link them", "是，关联")),),
)

COMMANDS = (
    Command(
        CommandSpec(
            "link",
            Words(
                "Link your chats on Telegram, Discord and the terminal into one account",
                "把你在 Telegram、Discord 和终端的对话关联为一个账户",
            ),
            "session",
            options=(CODE, CONFIRM),
        ),
        cmd_link,
    ),
    Command(
        CommandSpec("unlink", Words("Leave the linked account", "解除账户关联"), "session"),
        cmd_unlink,
    ),
)
