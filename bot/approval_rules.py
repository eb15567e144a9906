"""Standing approvals, seen and removed by people: `/rules` in a chat (Telegram, Discord, the
terminal) and `tapebot rules list|revoke` from the shell. These are the only ways policy records
change besides a human tapping "Always allow"; no tool the model can call reaches them.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from agent import StandingApproval
from bot.i18n import t


class RulesStore(Protocol):
    async def list_standing(
        self, chat_key: str | None, now: datetime, tool: str | None = None
    ) -> list[StandingApproval]: ...

    async def revoke_standing(self, chat_key: str | None, rule_id: str | None) -> int: ...


def _when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def format_rules(rules: Sequence[StandingApproval], lang: str, *, chat: bool = True) -> str:
    if not rules:
        return t(lang, "rules_none")
    lines = [t(lang, "rules_head")] if chat else []
    for r in rules:
        line = t(
            lang,
            "rules_line",
            id=r.id,
            tool=r.tool,
            scope=r.scope.describe(lang),
            who=r.granted_by,
            at=_when(r.created_at),
            expires=_when(r.expires_at),
        )
        lines.append(line if chat else f"{r.chat_key} · {line}")
    return "\n".join(lines)


async def rules_command(
    store: RulesStore,
    chat_key: str | Sequence[str],
    args: str,
    lang: str,
    now: datetime | None = None,
) -> str:
    """`/rules`, `/rules revoke <id>`, `/rules revoke all` for one chat — the rules kept under each
    of its keys (agent.approval.standing_keys: a linked user's account, then the chat); the reply
    text."""
    now = now or datetime.now(UTC)
    keys = (chat_key,) if isinstance(chat_key, str) else tuple(chat_key)
    argv = args.split()
    if not argv or argv == ["list"]:
        return format_rules([r for key in keys for r in await store.list_standing(key, now)], lang)
    if argv[0] == "revoke" and len(argv) == 2:
        target = None if argv[1].lower() == "all" else argv[1]
        n = sum([await store.revoke_standing(key, target) for key in keys])
        if n == 0 and target is not None:
            return t(lang, "rules_unknown", id=target[:32])
        return t(lang, "rules_revoked", n=n)
    return t(lang, "rules_usage")


async def active_count(store: RulesStore, chat_key: str | Sequence[str]) -> int:
    keys = (chat_key,) if isinstance(chat_key, str) else tuple(chat_key)
    now = datetime.now(UTC)
    return sum([len(await store.list_standing(key, now)) for key in keys])


# ---- tapebot rules list|revoke ---------------------------------------------------------------------
def main(argv: Sequence[str], ctx: Any) -> int:
    parser = argparse.ArgumentParser(prog="tapebot rules", description="standing approvals (Always allow)")
    sub = parser.add_subparsers(dest="action", required=True)
    p = sub.add_parser("list", help="list unexpired standing approvals")
    p.add_argument("--chat", help="only this chat (e.g. telegram:123)")
    p = sub.add_parser("revoke", help="revoke one standing approval by id, or all")
    p.add_argument("id", help="the id shown by `tapebot rules list`, or `all`")
    p.add_argument("--chat", help="only this chat (with `all`)")
    args = parser.parse_args(list(argv))
    settings = ctx.settings(require_model=False)
    settings.ensure_dirs()

    # the shell sees every chat (or the one --chat names), so its words say which, not "this chat"
    where = f"chat {args.chat}" if args.chat else "any chat"

    async def _go() -> tuple[int, str]:
        from memory.db import Database
        from memory.stores import SqlStore

        async with Database(settings.db_url) as db:
            store = SqlStore(db)
            if args.action == "list":
                rules = await store.list_standing(args.chat, datetime.now(UTC))
                if not rules:
                    return 0, f"No standing approvals in {where}."
                return 0, format_rules(rules, "en", chat=False)
            target = None if args.id.lower() == "all" else args.id
            n = await store.revoke_standing(args.chat, target)
            if n == 0 and target is not None:
                return 1, f"No standing approval {target[:32]} in {where} (see `tapebot rules list`)."
            return 0, t("en", "rules_revoked", n=n)

    code, text = asyncio.run(_go())
    print(text, file=ctx.stdout if code == 0 else ctx.stderr)
    return code
