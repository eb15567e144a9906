"""One tool definition, many surfaces: provider schemas, the README table, /help — and the README
must not drift from the specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.tools.registry import ToolContext, Toolset
from bot.toolcatalog import (
    TABLE_END,
    TABLE_START,
    anthropic_schema,
    catalog_specs,
    extract_block,
    main,
    openai_schema,
    readme_block,
    render_tool_table,
    update_readme,
)

README = Path(__file__).resolve().parents[2] / "README.md"

demo = Toolset("markets")


@demo.tool(concurrency_safe=True)
async def analyze_stock(ctx: ToolContext, code: str) -> dict:
    """Analyse one stock with the Wyckoff engine. Returns phase | events.

    Args:
        code: 6-digit code.
    """
    return {}


@demo.tool(requires_approval=True, side_effect="mutating")
async def update_portfolio(code: str, shares: int) -> str:
    """Set the shares held of one stock."""
    return ""


@demo.tool(background=True, side_effect="idempotent")
async def screen_stocks(top: int = 20) -> dict:
    """Whole-market screen for Wyckoff setups
    that continues on a second line."""
    return {}


def test_provider_schemas_come_from_the_spec():
    spec = demo.get("analyze_stock").spec
    assert anthropic_schema(spec) == {
        "name": "analyze_stock",
        "description": spec.description,
        "input_schema": spec.parameters,
    }
    assert openai_schema(spec) == {
        "type": "function",
        "function": {"name": "analyze_stock", "description": spec.description, "parameters": spec.parameters},
    }
    assert spec.parameters["properties"]["code"]["description"] == "6-digit code."


def test_tool_table():
    table = render_tool_table(demo.specs()).splitlines()
    assert table[:2] == ["| Tool | Toolset | What it does | Flags |", "|---|---|---|---|"]
    assert (
        table[2]
        == "| `analyze_stock` | markets | Analyse one stock with the Wyckoff engine. | read-only · parallel-safe |"
    )
    assert (
        table[3] == "| `update_portfolio` | markets | Set the shares held of one stock. | writes · approval |"
    )
    assert table[4] == (
        "| `screen_stocks` | markets | Whole-market screen for Wyckoff setups that continues on a second line. "
        "| idempotent · background |"
    )


def test_pipes_in_descriptions_are_escaped():
    ts = Toolset("x")

    @ts.tool
    def odd() -> str:
        """A | B"""
        return ""

    assert "A \\| B" in render_tool_table(ts.specs())


def test_readme_update_round_trip(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{TABLE_START}\nold\n{TABLE_END}\n\nmore\n", encoding="utf-8")
    assert update_readme(readme, demo.specs()) is True
    assert extract_block(readme.read_text()) == readme_block(demo.specs())
    assert readme.read_text().endswith("\n\nmore\n")
    assert update_readme(readme, demo.specs()) is False
    bare = tmp_path / "bare.md"
    bare.write_text("no markers")
    with pytest.raises(ValueError):
        update_readme(bare, demo.specs())


def test_catalog_has_the_built_in_tools():
    names = [s.name for s in catalog_specs()]
    assert len(names) == len(set(names))
    for expected in (
        "delegate_to_research",
        "delegate_to_analysis",
        "delegate_to_trading",
        "execute_skill",
        "ask_user",
    ):
        assert expected in names


def test_readme_tool_table_is_current():
    """Regenerate with `python -m bot.toolcatalog --write README.md`."""
    if not README.exists():
        pytest.skip("README.md does not exist yet")
    current = extract_block(README.read_text(encoding="utf-8"))
    if current is None:
        pytest.skip(f"README.md has no {TABLE_START} … {TABLE_END} markers yet")
    assert current == readme_block(catalog_specs()), (
        "README tool table is stale: run `python -m bot.toolcatalog --write README.md`"
    )


def test_cli_check_and_write(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text(f"{TABLE_START}\n{TABLE_END}\n")
    assert main(["--check", str(readme)]) == 1
    assert main(["--write", str(readme)]) == 0
    assert main(["--check", str(readme)]) == 0
    assert main([]) == 0 and "| Tool |" in capsys.readouterr().out
