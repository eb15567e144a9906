"""`tapebot link` — the terminal's side of /link: `tapebot link` lists the terminal's links and
gives a one-time code to send as /link CODE on Telegram or Discord; `tapebot link CODE` shows whom a
code from there links with and asks before linking (`--yes` answers for a script); `tapebot link
--remove` leaves the linked account."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from agent.errors import LinkError
from bot.commands.link import identity_label, link_error, overview
from bot.i18n import t
from memory.links import Identity, LinkStore

TERMINAL = Identity("terminal", "terminal")  # bot/console_chat.py's TERMINAL_USER


def main(argv: Sequence[str], ctx: Any) -> int:
    parser = argparse.ArgumentParser(
        prog="tapebot link", description="link the terminal with your Telegram or Discord chats (one account)"
    )
    parser.add_argument("code", nargs="?", help="a code /link gave in another chat")
    parser.add_argument(
        "--yes", action="store_true", help="link without asking (after reading the code's owner)"
    )
    parser.add_argument("--remove", action="store_true", help="leave the linked account")
    args = parser.parse_args(list(argv))
    if args.remove and args.code:
        parser.error("--remove takes no code")
    settings = ctx.settings(require_model=False)
    settings.ensure_dirs()
    from bot.console_chat import terminal_language

    lang = terminal_language(settings)

    async def _go() -> tuple[int, str]:
        from memory.db import Database

        async with Database(settings.db_url) as db:
            links = LinkStore(db)
            try:
                if args.remove:
                    await links.unlink(TERMINAL.key)
                    return 0, t(lang, "unlink_done")
                if not args.code:
                    return 0, await overview(links, TERMINAL, lang)
                offer = await links.peek(args.code, TERMINAL)
                other = identity_label(offer.identity, offer.name, lang)
                preview = t(
                    lang, "link_preview", me=t(lang, "identity_terminal"), other=other, code=args.code
                )
                if not args.yes and not _confirmed(preview.rsplit("\n", 1)[0], ctx):
                    return 1, t(lang, "link_cancelled")
                await links.redeem(args.code, TERMINAL)
                return 0, t(lang, "link_done", other=other)
            except LinkError as exc:
                if args.remove:
                    return 1, t(lang, "unlink_none")
                return 1, link_error(exc, lang)

    code, text = asyncio.run(_go())
    print(text, file=ctx.stdout if code == 0 else ctx.stderr)
    return code


def _confirmed(preview: str, ctx: Any) -> bool:
    print(preview, file=ctx.stdout)
    if not sys.stdin.isatty():
        return False
    try:
        answer = input("Link? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in {"y", "yes", "是", "确认"}
