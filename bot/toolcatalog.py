"""One tool definition, many surfaces.

`ToolSpec` is the single definition of a tool (name, description, input schema, safety flags).
Everything a person or another program sees is generated from it here: the Anthropic and OpenAI
tool schemas (the providers convert `ToolSchema` themselves; these are for tests and MCP), the
README's tool table between `<!-- tools:start -->` and `<!-- tools:end -->`. (The chat's /help
lists commands, not tools: bot/commands/.) The MCP server (`bot/mcp_server.py`) builds its MCP tools from the same specs.

Regenerate the README table with `python -m bot.toolcatalog --write README.md`;
`tests/mcp/test_toolcatalog_readme.py` fails when it is stale.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from agent import Toolset, ToolSpec
from agent.texts import Text

TABLE_START = "<!-- tools:start -->"
TABLE_END = "<!-- tools:end -->"

# Modules whose module-level Toolsets make up tapebot's built-in tools, in README order. A module
# that does not exist (yet) is skipped; add new tool modules here.
CATALOG_MODULES: tuple[str, ...] = (
    "markets.tools",
    "memory.tools",
    "scheduler.tools",
    "agent.subagents",
    "agent.skills",
    "agent.background_tools",
    "agent.tools.core",
    "agent.tools.builtin",
)

_EFFECT: dict[str, Text] = {
    "read_only": Text(
        en="read-only",
        zh="只读",
    ),
    "idempotent": Text(
        en="idempotent",
        zh="幂等",
    ),
    "mutating": Text(
        en="writes",
        zh="写入",
    ),
}

_FLAGS: dict[str, Text] = {
    "approval": Text(en="approval", zh="需确认"),
    "background": Text(en="background", zh="后台"),
    "parallel": Text(en="parallel-safe", zh="可并行"),
}


# ---- provider schemas -------------------------------------------------------------------------
def anthropic_schema(spec: ToolSpec) -> dict[str, Any]:
    """The Anthropic Messages API tool definition."""
    return {"name": spec.name, "description": spec.description, "input_schema": spec.parameters}


def openai_schema(spec: ToolSpec) -> dict[str, Any]:
    """The OpenAI Chat Completions function tool definition."""
    return {
        "type": "function",
        "function": {"name": spec.name, "description": spec.description, "parameters": spec.parameters},
    }


# ---- the catalog ------------------------------------------------------------------------------
def _import_optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            return None  # the module itself is absent, not a broken import inside it
        raise


def catalog_toolsets(modules: Iterable[str] = CATALOG_MODULES) -> list[Toolset]:
    """The module-level Toolsets of tapebot's built-in tool modules, in catalog order."""
    found: list[Toolset] = []
    seen: set[int] = set()
    for name in modules:
        module = _import_optional(name)
        if module is None:
            continue
        for value in vars(module).values():
            if isinstance(value, Toolset) and id(value) not in seen and len(value):
                seen.add(id(value))
                found.append(value)
    return found


def catalog_specs(modules: Iterable[str] = CATALOG_MODULES) -> list[ToolSpec]:
    """Every built-in tool's spec, once, in catalog order."""
    specs: list[ToolSpec] = []
    names: set[str] = set()
    for toolset in catalog_toolsets(modules):
        for spec in toolset.specs():
            if spec.name not in names:
                names.add(spec.name)
                specs.append(spec)
    return specs


def flags(spec: ToolSpec, lang: str = "en") -> list[str]:
    out = [_EFFECT[spec.side_effect].pick(lang)]
    if spec.requires_approval:
        out.append(_FLAGS["approval"].pick(lang))
    if spec.background:
        out.append(_FLAGS["background"].pick(lang))
    if spec.concurrency_safe:
        out.append(_FLAGS["parallel"].pick(lang))
    return out


def summarize(spec: ToolSpec, limit: int = 160) -> str:
    """What the tool does in one sentence: the first sentence of the description's first paragraph
    (docstrings wrap lines, so `spec.summary` alone can stop mid-sentence)."""
    paragraph = (spec.description or spec.summary or spec.name).strip().split("\n\n")[0]
    text = " ".join(paragraph.split())
    for stop in (". ", "。", "! ", "? "):
        cut = text.find(stop)
        if 0 < cut < limit:
            text = text[: cut + len(stop.strip())]
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render_tool_table(specs: Iterable[ToolSpec]) -> str:
    """The README's Markdown tool table: name, toolset, what it does, flags."""
    lines = ["| Tool | Toolset | What it does | Flags |", "|---|---|---|---|"]
    for spec in specs:
        summary = summarize(spec)
        lines.append(
            f"| `{spec.name}` | {_cell(spec.toolset or '-')} | {_cell(summary)} | {' · '.join(flags(spec))} |"
        )
    return "\n".join(lines)


def readme_block(specs: Iterable[ToolSpec]) -> str:
    return f"{TABLE_START}\n{render_tool_table(specs)}\n{TABLE_END}"


def extract_block(text: str) -> str | None:
    """The README's current block (markers included), or None when the markers are absent."""
    start = text.find(TABLE_START)
    end = text.find(TABLE_END, start + 1) if start >= 0 else -1
    if start < 0 or end < 0:
        return None
    return text[start : end + len(TABLE_END)]


def update_readme(path: Path, specs: Iterable[ToolSpec]) -> bool:
    """Replace the block between the markers; returns whether the file changed. Raises
    ValueError when the markers are missing (the README owner places them)."""
    text = path.read_text(encoding="utf-8")
    current = extract_block(text)
    if current is None:
        raise ValueError(f"{path} has no {TABLE_START} … {TABLE_END} markers")
    new = readme_block(specs)
    if new == current:
        return False
    path.write_text(text.replace(current, new, 1), encoding="utf-8")
    return True


# ---- command line -----------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bot.toolcatalog", description=__doc__.splitlines()[0])
    parser.add_argument("readme", nargs="?", type=Path, default=Path("README.md"))
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the table between the markers")
    mode.add_argument("--check", action="store_true", help="exit 1 if the table is stale")
    args = parser.parse_args(argv)
    specs = catalog_specs()
    if not (args.write or args.check):
        print(render_tool_table(specs))
        return 0
    if args.write:
        changed = update_readme(args.readme, specs)
        print(f"{args.readme}: {'updated' if changed else 'already current'}")
        return 0
    current = extract_block(args.readme.read_text(encoding="utf-8"))
    if current != readme_block(specs):
        print(f"{args.readme}: tool table is stale; run python -m bot.toolcatalog --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
