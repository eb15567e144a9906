"""The README stays true for a newcomer: two set-up commands, the as-of dates the bundled data
really has, PATH-safe MCP snippets, the onboarding steps, and every command documented."""

from __future__ import annotations

import re
from pathlib import Path

from bot.cli import EXTENSIONS, build_parser

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def test_exactly_two_setup_commands():
    blocks = re.findall(r"```sh\n(.*?)```", _section("Set up"), re.S)
    assert len(blocks) == 2
    assert all(len(b.strip().splitlines()) == 1 for b in blocks)
    assert "tapebot chat" in blocks[0] and "pytest" in blocks[1]


def test_as_of_dates_match_the_bundled_data():
    from markets.data import MarketData

    data = MarketData()
    intro = " ".join(README[: README.index("## Set up")].split())
    index_as_of = data.bars(data.resolve("000300")).dates[-1]  # the index is read up to the stocks' date
    assert f"300 liquid A-shares and the CSI 300 index up to {data.as_of('cn')}" in intro
    assert str(index_as_of) == str(data.as_of("cn"))
    assert f"BTC/ETH up to {data.as_of('crypto')}" in intro


def test_mcp_snippets_do_not_rely_on_path():
    mcp = _section("Connect an MCP client")
    assert '"command": "tapebot"' not in mcp.split("Or put `tapebot` on PATH")[0]
    assert ".venv/bin/tapebot" in mcp and "pipx install ." in mcp and "uv tool install ." in mcp


def test_onboarding_steps():
    for words in (
        "@BotFather",
        "/newbot",
        "user id",
        "applications.commands",
        "Message Content Intent",
        "Developer Mode",
        "Copy User ID",
        "Reset Token",
    ):
        assert words in README, words


def test_cost_paragraph_has_measured_figures():
    cost = _section("What a turn costs")
    assert "bench.call_cost" in cost
    m = re.search(r"≈\d+\.\dK input tokens, ≈\d+\.\dK of them the (\d+) tool schemas", " ".join(cost.split()))
    assert m, "the cost paragraph lost its figures"
    tools = re.findall(r"^\| `[a-z_]+` \|", README, re.M)
    assert int(m.group(1)) == len(tools), "tool count changed: rerun `python -m bench.call_cost`"


def test_service_and_upgrade():
    service = _section("Run it as a service")
    for words in ("deploy/tapebot.service", "deploy/Dockerfile", "deploy/compose.yaml", "tapebot db backup"):
        assert words in service, words


def test_every_command_is_documented():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in [*sub.choices, *EXTENSIONS]:
        assert f"`tapebot {name}" in README, name
    for option in ("--version", "--log-file"):
        assert option in README


def test_licence_and_data_terms():
    assert "MIT" in _section("Licence and data") and "DATA_SOURCES.md" in _section("Licence and data")
