"""`tapebot mcp --http`: streamable HTTP at /mcp, a bearer token, DNS-rebinding protection and
loopback unless told otherwise — a real server process, reached with the Python SDK's client and
plain HTTP."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from bot.mcp_http import Listen, ListenError, allowed_hosts, check_exposure, parse_listen
from tests.mcp.http_server import ROOT, mcp_http_server, server_env

TOKEN = "tb-mcp-test-token-5f1c9e"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


# ---- the listen address -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("8765", "127.0.0.1", 8765),
        ("0.0.0.0:80", "0.0.0.0", 80),
        ("[::1]:9000", "::1", 9000),
        (":7", "127.0.0.1", 7),
    ],
)
def test_parse_listen(text, host, port):
    assert parse_listen(text) == Listen(host, port)


@pytest.mark.parametrize("bad", ["", "localhost", "host:port", "127.0.0.1:70000"])
def test_parse_listen_refuses_what_is_not_an_address(bad):
    with pytest.raises(ListenError, match="--http"):
        parse_listen(bad)


def test_beyond_loopback_needs_a_token():
    check_exposure(Listen("127.0.0.1", 1), "")
    check_exposure(Listen("localhost", 1), "")
    check_exposure(Listen("0.0.0.0", 1), "secret")
    with pytest.raises(ListenError, match="TAPEBOT_MCP_TOKEN"):
        check_exposure(Listen("0.0.0.0", 1), "")
    with pytest.raises(ListenError, match="TAPEBOT_MCP_TOKEN"):
        check_exposure(Listen("192.0.2.7", 1), "")


def test_allowed_hosts_are_loopback_the_bound_address_and_the_named_ones():
    hosts = allowed_hosts(Listen("192.0.2.7", 1), ["bot.example"])
    assert {"127.0.0.1:*", "localhost:*", "192.0.2.7:*", "bot.example", "bot.example:*"} <= set(hosts)
    assert "0.0.0.0:*" not in allowed_hosts(Listen("0.0.0.0", 1), [])


def test_the_command_refuses_a_public_address_without_a_token(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "bot.cli", "mcp", "--http", "0.0.0.0:0"],
        cwd=ROOT,
        env=server_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "refusing to serve MCP on 0.0.0.0 without a token: set TAPEBOT_MCP_TOKEN" in r.stderr
    assert "Traceback" not in r.stderr


# ---- a real server --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with mcp_http_server(tmp_path_factory.mktemp("mcp-http") / "home", token=TOKEN) as server:
        yield server


def test_requests_without_the_token_are_refused(served):
    with httpx.Client(timeout=30) as http:
        bare = http.post(served.url, json=INIT, headers=HEADERS)
        wrong = http.post(served.url, json=INIT, headers={**HEADERS, "authorization": "Bearer nope"})
        right = http.post(served.url, json=INIT, headers={**HEADERS, "authorization": f"Bearer {TOKEN}"})
    assert bare.status_code == 401 and bare.headers["www-authenticate"].startswith("Bearer")
    assert wrong.status_code == 401
    assert right.status_code == 200 and "serverInfo" in right.text


def test_a_foreign_host_header_is_refused_even_with_the_token(served):
    # DNS rebinding: a page on evil.example resolved to 127.0.0.1 sends its own Host header.
    port = served.url.split(":")[2].split("/")[0]
    with httpx.Client(timeout=30) as http:
        r = http.post(
            served.url,
            json=INIT,
            headers={**HEADERS, "authorization": f"Bearer {TOKEN}", "host": f"evil.example:{port}"},
        )
        origin = http.post(
            served.url,
            json=INIT,
            headers={**HEADERS, "authorization": f"Bearer {TOKEN}", "origin": "http://evil.example"},
        )
    assert r.status_code in (403, 421)
    assert origin.status_code == 403


async def test_the_sdk_client_calls_tools_reads_resources_and_gets_prompts(served):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    async with Client(streamable_http_client(served.url, http_client=http)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"get_market_price", "analyze_stock", "portfolio"} <= names
        assert "execute_trade" not in names  # writes stay off without --allow-writes
        price = await client.call_tool("get_market_price", {"code": 600519})
        assert not price.is_error and price.structured_content["symbol"] == "600519"
        assert "as of 2025-09-03" in price.structured_content["note"]
        portfolio = await client.read_resource("tapebot://portfolio")
        assert "cash" in portfolio.contents[0].text
        chart = await client.read_resource("tapebot://stock/600519/chart.png")
        assert chart.contents[0].mime_type == "image/png" and len(chart.contents[0].blob) > 1000
        # alerts and the watch list are read even though manage_alerts (a write) is not served
        assert "manage_alerts" not in names
        listed = {r.uri for r in (await client.list_resources()).resources}
        assert {"tapebot://alerts", "tapebot://watchlist"} <= listed
        alerts = json.loads((await client.read_resource("tapebot://alerts")).contents[0].text)
        assert alerts.get("alerts") == [] or "no alerts" in json.dumps(alerts).lower()
        prompt = await client.get_prompt("daily_brief", {"arguments": "banks"})
        assert "banks" in prompt.messages[0].content.text
    audit = [
        json.loads(line) for line in (served.home / "results" / "mcp_audit.jsonl").read_text().splitlines()
    ]
    assert ("get_market_price", True) in {(e["tool"], e["ok"]) for e in audit}
    assert TOKEN not in "".join(served.output)  # the token is never printed or logged
