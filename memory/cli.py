"""`/memory` in chat and `tapebot memory …` in the terminal: list recent, search, forget, trace.

    list [--type T] [--limit N] [--scope S]   newest memories
    search QUERY                               memories ranked by QUERY (every scope unless --scope)
    forget ID                                  delete one memory
    trace ID                                   a memory's source: the chat messages it came from,
                                               or the L1 memories an L2/L3 one was distilled from

`memory_command(services, scope, text)` answers the chat command (one user's scope);
`memory_cli(args, settings)` runs the terminal command over the configured database (every scope
unless `--scope` is given).
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from agent.messages import Message
from agent.texts import Text
from memory.longterm import TYPE_RULES, MemoryRecord, MemoryStore
from memory.recall import MemoryRecall
from memory.terms import containment

if TYPE_CHECKING:  # annotations only: the settings module is loaded by the caller
    from config.settings import Settings

# Loads one session's messages (`SessionStore.load_messages`), to show what a memory came from.
SessionMessages = Callable[[str], Awaitable[list[Message]]]


# `/memory` speaks the chat's language; the bot's own table lives in bot/, above memory/, so the
# words are here (English is also what `tapebot memory` prints)
MEMORY_STRINGS: dict[str, Text] = {
    "usage": Text(
        en="Usage: /memory [list [type]] | search <text> | forget <id> | trace <id>",
        zh="用法：/memory [list [类型]] | search <文字> | forget <id> | trace <id>",
    ),
    "none_yet": Text(
        en="(no memories yet)",
        zh="（还没有记忆）",
    ),
    "search_head": Text(
        en="Memories matching “{q}”:",
        zh="与“{q}”相关的记忆：",
    ),
    "search_none": Text(
        en="No memories match “{q}”.",
        zh="没有与“{q}”相关的记忆。",
    ),
    "forgot": Text(
        en="forgot {record}",
        zh="已删除：{record}",
    ),
    "not_found": Text(
        en="no memory #{id}",
        zh="没有记忆 #{id}",
    ),
    "source": Text(
        en="source: {ref} ({kind})",
        zh="来源：{ref}（{kind}）",
    ),
    "no_source": Text(
        en="(none)",
        zh="（无）",
    ),
    "from": Text(
        en="  from {record}",
        zh="  来自 {record}",
    ),
    "from_deleted": Text(
        en="  from #{id} (deleted)",
        zh="  来自 #{id}（已删除）",
    ),
    "session_unavailable": Text(
        en="  (session {session} unavailable: {error})",
        zh="  （会话 {session} 无法读取：{error}）",
    ),
    "user_said": Text(
        en="  user said ({score} overlap): {text}",
        zh="  用户说过（重合 {score}）：{text}",
    ),
}


def say(lang: str, key: str, **kw: object) -> str:
    return MEMORY_STRINGS[key].pick(lang).format(**kw)


def build_memory_parser(prog: str = "tapebot memory") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="inspect, search and edit long-term memories")
    parser.add_argument("--scope", help="only this user's memories (default: every scope)")
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    p = sub.add_parser("list", help="newest memories")
    p.add_argument("--type", choices=sorted(TYPE_RULES), help="only this type")
    p.add_argument("--limit", type=int, default=20)
    p = sub.add_parser("search", help="hybrid recall for a query")
    p.add_argument("query", nargs="+")
    p = sub.add_parser("forget", help="delete a memory")
    p.add_argument("id", type=int)
    p = sub.add_parser("trace", help="show where a memory came from")
    p.add_argument("id", type=int)
    return parser


def format_record(r: MemoryRecord) -> str:
    codes = f" [{','.join(r.codes)}]" if r.codes else ""
    return f"#{r.id} {r.created_at:%Y-%m-%d} {r.level}/{r.memory_type}{codes} {r.content}"


async def trace_text(
    store: MemoryStore,
    record: MemoryRecord,
    session_messages: SessionMessages | None = None,
    *,
    lang: str = "en",
) -> str:
    """What a memory came from. `session_messages` loads a session's messages (`SessionStore.load_messages`)."""
    ref = record.source_ref or say(lang, "no_source")
    lines = [format_record(record), say(lang, "source", ref=ref, kind=record.source_kind)]
    if record.meta:
        lines.append(
            "meta: " + ", ".join(f"{k}={v}" for k, v in sorted(record.meta.items()) if k != "source_l1_ids")
        )
    for l1_id in record.meta.get("source_l1_ids", [])[:30]:
        src = await store.get(int(l1_id))
        lines.append(
            say(lang, "from", record=format_record(src)) if src else say(lang, "from_deleted", id=l1_id)
        )
    if record.source_ref.startswith("chat_log:") and session_messages is not None:
        session_id = record.source_ref.split(":", 1)[1]
        try:
            messages = await session_messages(session_id)
        except Exception as exc:  # noqa: BLE001 — shown in the listing; the rest still prints
            lines.append(say(lang, "session_unavailable", session=session_id, error=exc))
            messages = []
        scored = sorted(
            ((containment(record.content, m.text), m.text) for m in messages if m.role == "user" and m.text),
            reverse=True,
        )
        for score, text in scored[:3]:
            if score > 0:
                lines.append(say(lang, "user_said", score=f"{score:.0%}", text=" ".join(text.split())[:200]))
    return "\n".join(lines)


async def search_records(
    recall: MemoryRecall, scopes: Sequence[str], query: str, limit: int = 10
) -> list[tuple[str, MemoryRecord]]:
    """Memories ranked by `query` alone (no pinned preferences: those match any query), best
    first across `scopes`, as (scope, record)."""
    ranked = []
    for scope in scopes:
        result = await recall.search(scope, query)
        ranked += [(item.score, scope, item.record) for item in result.ranked]
    ranked.sort(key=lambda x: x[0], reverse=True)
    return [(scope, record) for _, scope, record in ranked[:limit]]


async def memory_command(
    store: MemoryStore,
    recall: MemoryRecall,
    scope: str,
    text: str,
    *,
    session_messages: SessionMessages | None = None,
    lang: str = "en",
) -> str:
    """The chat `/memory` command for one user (`text` is what follows `/memory`)."""
    try:
        words = shlex.split(text or "")
    except ValueError:
        words = (text or "").split()
    action = words[0].lower() if words else "list"
    rest = words[1:]
    if action == "list":
        types = [rest[0]] if rest and rest[0] in TYPE_RULES else None
        records = await store.recent(scope, types=types, limit=15)
        return "\n".join(format_record(r) for r in records) if records else say(lang, "none_yet")
    if action == "search" and rest:
        query = " ".join(rest)
        found = await search_records(recall, [scope], query)
        if not found:
            return say(lang, "search_none", q=query[:80])
        return "\n".join([say(lang, "search_head", q=query[:80]), *(format_record(r) for _, r in found)])
    if action in ("forget", "trace") and rest and rest[0].lstrip("#").isdigit():
        memory_id = int(rest[0].lstrip("#"))
        if action == "forget":
            deleted = await store.delete(memory_id, scope=scope)
            if deleted is None:
                return say(lang, "not_found", id=memory_id)
            return say(lang, "forgot", record=format_record(deleted))
        record = await store.get(memory_id, scope=scope)
        if record is None:
            return say(lang, "not_found", id=memory_id)
        return await trace_text(store, record, session_messages, lang=lang)
    return say(lang, "usage")


async def run_memory_cli(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    from memory.db import Database
    from memory.stores import SqlStore

    async with Database(settings.db_url) as db:
        store = MemoryStore(db)
        scope = getattr(args, "scope", None)
        action = args.action or "list"
        if action == "list":
            types = [args.type] if getattr(args, "type", None) else None
            records = await store.recent(scope, types=types, limit=getattr(args, "limit", 20))
            for r in records:
                print(f"{format_record(r)}  ({r.scope})", file=out)
            if not records:
                where = f" in scope {scope}" if scope else ""
                kind = f" of type {args.type}" if types else ""
                print(f"(no memories{kind}{where} yet: they are saved as you chat)", file=out)
            return 0
        if action == "search":
            scopes = [scope] if scope else await store.scopes()
            found = await search_records(MemoryRecall(store), scopes, " ".join(args.query), limit=20)
            for in_scope, r in found:
                print(f"{format_record(r)}  ({in_scope})", file=out)
            if not found:
                print("(no memory matches)", file=out)
            return 0
        record = await store.get(args.id, scope=scope)
        if record is None:
            print(f"no memory #{args.id}", file=out)
            return 1
        if action == "forget":
            await store.delete(args.id)
            print(f"forgot {format_record(record)}", file=out)
            return 0
        print(await trace_text(store, record, SqlStore(db).load_messages), file=out)
        return 0


def memory_cli(
    args: argparse.Namespace | Sequence[str], settings: Settings, *, out: TextIO | None = None
) -> int:
    """`tapebot memory …`: `args` is the parsed namespace or the raw arguments after `memory`."""
    import sys

    if not isinstance(args, argparse.Namespace):
        args = build_memory_parser().parse_args(list(args))
    return asyncio.run(run_memory_cli(args, settings, out or sys.stdout))
