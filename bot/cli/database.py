"""`tapebot db upgrade|backup` and `tapebot usage`: the database's revision, a backup, and what the
models cost — imported only when one of them runs."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.cli.invocation import CliContext


def upgrade(ctx: CliContext) -> int:
    from config.loader import mask

    settings = ctx.settings(require_model=False)
    settings.ensure_dirs()

    async def _go() -> str | None:
        from memory.db import upgrade

        return await upgrade(settings.db_url)

    revision = asyncio.run(_go())
    print(f"database {mask(settings)['database_url']} is at revision {revision}", file=ctx.stdout)
    return 0


def backup(ctx: CliContext, *, dest: Path | None = None) -> int:
    from memory.db import backup_sqlite

    settings = ctx.settings(require_model=False)
    path = backup_sqlite(settings.db_url, dest)
    print(f"backed up to {path}", file=ctx.stdout)
    return 0


def usage(ctx: CliContext, *, days: float = 30) -> int:
    settings = ctx.settings(require_model=False)
    settings.ensure_dirs()

    async def _go() -> tuple[list[Any], Any, list[Any]]:
        from memory.db import Database
        from memory.stores import SqlStore

        async with Database(settings.db_url) as db:
            store = SqlStore(db)
            return (
                await store.usage_totals(days),
                await store.usage_summary(days),
                await store.side_call_totals(days),
            )

    totals, summary, side = asyncio.run(_go())
    print(format_usage(totals, days, summary), file=ctx.stdout)
    if side:
        print(format_side_calls(side, summary), file=ctx.stdout)
    return 0


SIDE_NAMES = {"memory": "memory extraction", "taskstate": "task state"}


def format_side_calls(side: Sequence[Any], summary: Any | None) -> str:
    """The model calls tapebot made for its own upkeep (included in the table above): how many,
    their tokens and cost, and their share of all model calls and tokens."""
    calls = sum(s.calls for s in side)
    tokens = sum(s.input_tokens + s.output_tokens + s.cache_read_tokens + s.cache_write_tokens for s in side)
    lines = ["side calls (tapebot's own upkeep; included above, counted in no turn):"]
    for s in side:
        lines.append(
            f"  {SIDE_NAMES.get(s.model, s.model)}: {s.calls:,} call{'s' * (s.calls != 1)}, "
            f"input {s.input_tokens + s.cache_read_tokens + s.cache_write_tokens:,}, "
            f"output {s.output_tokens:,}, cost {s.cost:.4f}"
        )
    if summary is not None and summary.calls:
        all_tokens = (
            summary.input_tokens
            + summary.output_tokens
            + summary.cache_read_tokens
            + summary.cache_write_tokens
        )
        share = tokens / all_tokens if all_tokens else 0.0
        lines.append(f"  {calls:,} of {summary.calls:,} model calls; {share:.0%} of tokens")
    return "\n".join(lines)


def format_usage(totals: Sequence[Any], days: float, summary: Any | None = None) -> str:
    """A fixed-width table: one row per model, then the total (turns counted once each)."""
    span = f"{days:g} day{'s' * (days != 1)}"
    if not totals:
        return f"no model usage recorded in the last {span}"
    header = ("model", "turns", "input", "output", "cache read", "cache write", "cost")
    rows = [
        (
            t.model,
            f"{t.turns:,}",
            f"{t.input_tokens:,}",
            f"{t.output_tokens:,}",
            f"{t.cache_read_tokens:,}",
            f"{t.cache_write_tokens:,}",
            f"{t.cost:.4f}",
        )
        for t in totals
    ]
    turns = summary.turns if summary is not None else sum(t.turns for t in totals)
    rows.append(
        (
            "total",
            f"{turns:,}",
            f"{sum(t.input_tokens for t in totals):,}",
            f"{sum(t.output_tokens for t in totals):,}",
            f"{sum(t.cache_read_tokens for t in totals):,}",
            f"{sum(t.cache_write_tokens for t in totals):,}",
            f"{sum(t.cost for t in totals):.4f}",
        )
    )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def fmt(r: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )

    rule = "  ".join("-" * w for w in widths)
    lines = [
        f"usage over the last {span}",
        fmt(header),
        rule,
        *(fmt(r) for r in rows[:-1]),
        rule,
        fmt(rows[-1]),
    ]
    return "\n".join(lines)
