"""MCP servers as tapebot tools, against a real MCP server subprocess (tests/mcp/mcp_toy_server.py)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from agent import events as ev
from agent.approval import Requester
from agent.errors import InvalidToolArguments, ToolFailed, ToolTimedOut
from agent.inmemory import InMemoryStore
from agent.mcp_client import McpManager, namespaced, server_environment, stdio_parameters
from agent.providers.scripted import ScriptedClient, reply
from agent.runtime import AgentRuntime, TurnRequest
from agent.tools.registry import ToolContext, ToolOutput, Toolset
from config.settings import McpServerConfig
from tests.fakes.waits import eventually

TOY = str(Path(__file__).with_name("mcp_toy_server.py"))


def toy(name: str = "toy", mode: str = "normal", **kw) -> McpServerConfig:
    return McpServerConfig(name=name, command=[sys.executable, TOY, mode], **kw)


@pytest.fixture
async def manager(tmp_path):
    environ = {**os.environ, "TOY_ALLOWED": "1", "TOY_SECRET": "s3cret"}
    mgr = McpManager(
        [toy(env_allowlist=["TOY_ALLOWED"], tool_overrides={"echo": False, "add": False}, timeout=10)],
        environ=environ,
        log_dir=tmp_path / "logs",
        results_dir=tmp_path / "results",
    )
    await mgr.start()
    yield mgr
    await mgr.stop()


def test_names_are_namespaced_and_provider_safe():
    assert namespaced("files", "read_file") == "files__read_file"
    assert namespaced("my server", "write.note") == "my_server__write_note"
    long = namespaced("s" * 40, "t" * 40)
    assert len(long) == 64 and long.startswith("s" * 40 + "__")
    assert long != namespaced("s" * 40, "t" * 39 + "u")


async def test_tools_are_registered_namespaced_with_their_schema_and_approval(manager):
    assert manager.status() == [f"toy: ready, 11 tool(s) ({sys.executable} {TOY} normal)"]
    assert manager.status("zh") == [f"toy：就绪，11 个工具（{sys.executable} {TOY} normal）"]
    tools = {t.name: t for t in manager.toolset}
    assert set(tools) == {
        "toy__echo",
        "toy__add",
        "toy__write_note",
        "toy__picture",
        "toy__fail",
        "toy__slow",
        "toy__env",
        "toy__big",
        "toy__die",
        "toy__grow",
        "toy__survey",
    }
    add = tools["toy__add"].spec
    assert add.parameters["required"] == ["a", "b"] and add.toolset == "mcp"
    assert add.description.startswith("[MCP server toy] Add two integers")
    # approval by default; the config overrides echo and add
    assert not add.requires_approval and not tools["toy__echo"].spec.requires_approval
    assert tools["toy__write_note"].spec.requires_approval
    assert tools["toy__write_note"].spec.side_effect == "mutating"
    assert add.side_effect == "read_only" and add.concurrency_safe


async def test_calls_return_text_validate_arguments_and_report_errors(manager, tmp_path):
    tools = {t.name: t for t in manager.toolset}
    ctx = ToolContext(call_id="c1")
    assert await tools["toy__add"].call(ctx, {"a": 2, "b": 3}) == "5"
    assert await tools["toy__write_note"].call(ctx, {}) == "noted"
    with pytest.raises(InvalidToolArguments) as info:
        await tools["toy__add"].call(ctx, {"a": "two"})
    assert "b" in str(info.value) and "'two' is not of type 'integer'" in str(info.value)
    with pytest.raises(ToolFailed) as failed:
        await tools["toy__fail"].call(ctx, {})
    assert "the upstream API said no" in str(failed.value)
    big = await tools["toy__big"].call(ctx, {})
    assert len(big) < 21_000 and big.endswith("[output capped at 20,000 characters]")
    picture = await tools["toy__picture"].call(ctx, {})
    assert isinstance(picture, ToolOutput) and picture.content.startswith("here it is")
    assert picture.attachments[0].path.read_bytes().startswith(b"\x89PNG")


async def test_server_environment_is_only_the_allowlist_and_path(manager):
    tools = {t.name: t for t in manager.toolset}
    names = set((await tools["toy__env"].call(ToolContext(), {})).split(","))
    assert "TOY_ALLOWED" in names and "PATH" in names
    assert "TOY_SECRET" not in names and "HOME" not in names and "USER" not in names
    config = toy(env_allowlist=["A"])
    assert server_environment(config, {"A": "1", "B": "2", "PATH": "/bin"}) == {"A": "1", "PATH": "/bin"}
    params = stdio_parameters(config, {"A": "1", "PATH": "/bin"})
    assert "1" not in params.args  # only variable names are on the command line


async def test_a_call_that_hangs_times_out(tmp_path):
    async with McpManager([toy(timeout=1)], start_timeout=30) as mgr:
        slow = next(t for t in mgr.toolset if t.name == "toy__slow")
        with pytest.raises(ToolTimedOut):
            await slow.call(ToolContext(), {})
        echo = next(t for t in mgr.toolset if t.name == "toy__echo")
        assert await echo.call(ToolContext(), {"text": "still alive"}) == "still alive"


async def test_hanging_and_crashing_servers_are_reported_without_stopping_the_others(tmp_path):
    mgr = McpManager(
        [toy("hangs", "hang", timeout=1), toy("crashes", "crash", timeout=10), toy("good", timeout=10)],
        log_dir=tmp_path / "logs",
    )
    await mgr.start()
    try:
        status = mgr.status()
        assert status[0] == "hangs: failed: not responding: no answer within 1 s"
        assert status[1].startswith("crashes: failed: failed to start:")
        assert "stderr: toy: missing TOY_API_KEY" in status[1]
        assert status[2].startswith("good: ready, 11 tool(s)")
        assert {t.name.split("__")[0] for t in mgr.toolset} == {"good"}
    finally:
        await mgr.stop()


async def test_a_server_that_dies_mid_session_is_reported_and_its_tools_fail_cleanly(manager):
    tools = {t.name: t for t in manager.toolset}
    with pytest.raises(ToolFailed):
        await tools["toy__die"].call(ToolContext(), {})
    assert manager.status()[0].startswith("toy: disconnected: the server went away")
    assert manager.status("zh")[0].startswith("toy：已断开：the server went away")
    with pytest.raises(ToolFailed) as info:
        await tools["toy__echo"].call(ToolContext(), {"text": "hi"})
    assert "not available" in str(info.value)


async def test_a_server_that_went_away_is_reconnected_and_its_tools_work_again(tmp_path):
    mgr = McpManager([toy(timeout=10)], log_dir=tmp_path / "logs", reconnect_delay=0.05)
    await mgr.start()
    try:
        tools = {t.name: t for t in mgr.toolset}
        assert await tools["toy__echo"].call(ToolContext(), {"text": "before"}) == "before"
        with pytest.raises(ToolFailed):
            await tools["toy__die"].call(ToolContext(), {})
        assert "reconnecting" in mgr.status()[0]
        conn = mgr.connections[0]
        await eventually(lambda: conn.state == "ready", timeout=10)  # a fresh server, in the background
        assert conn.reconnects == 1
        assert mgr.status()[0].startswith("toy: ready")
        assert await tools["toy__echo"].call(ToolContext(), {"text": "after"}) == "after"  # same tool object
    finally:
        await mgr.stop()
    assert conn.state == "stopped"


async def test_a_server_that_never_started_is_not_retried(tmp_path):
    async with McpManager([toy("crashes", "crash", timeout=10)], reconnect_delay=0.01) as mgr:
        conn = mgr.connections[0]
        await eventually(lambda: conn.state == "failed")
        await asyncio.sleep(0.1)  # absence: ten times the retry delay for a wrong retry to start
        assert conn.state == "failed" and conn._task is not None and conn._task.done()


async def test_mcp_tools_require_approval_in_the_loop_by_default(tmp_path):
    async with McpManager([toy(timeout=10)]) as mgr:
        client = ScriptedClient([reply(tool_calls=[("toy__echo", {"text": "hi"})]), reply("done")])
        runtime = AgentRuntime(
            model_for=lambda _m: client, tools=mgr.toolset, store=InMemoryStore(), workspace=tmp_path
        )
        events = [
            e async for e in runtime.run(TurnRequest("s1", "echo", who=Requester("u1", "tg:1", ("u1",))))
        ]
        assert any(isinstance(e, ev.ApprovalRequired) and e.tool == "toy__echo" for e in events)
        assert events[-1].status == "suspended"


async def test_streamable_http_server(tmp_path):
    """A `url =` server: the toy server's streamable-HTTP app on a loopback port."""
    import asyncio

    import uvicorn

    from tests.mcp.mcp_toy_server import server as toy_server

    app = toy_server.streamable_http_app()
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", lifespan="on")
    web = uvicorn.Server(config)
    serving = asyncio.create_task(web.serve())
    try:
        for _ in range(200):
            if web.started:
                break
            await asyncio.sleep(0.02)
        port = web.servers[0].sockets[0].getsockname()[1]
        cfg = McpServerConfig(name="web", url=f"http://127.0.0.1:{port}/mcp", timeout=10)
        async with McpManager([cfg]) as mgr:
            assert mgr.status()[0].startswith("web: ready, 11 tool(s)")
            add = next(t for t in mgr.toolset if t.name == "web__add")
            assert await add.call(ToolContext(), {"a": 20, "b": 22}) == "42"
    finally:
        web.should_exit = True
        await asyncio.wait_for(serving, 10)


async def test_a_changed_tool_list_reaches_the_runtime(tmp_path):
    """The server adds a tool and drops one while the bot runs (notifications/tools/list_changed):
    the runtime's toolset and the schemas sent to the model follow, without a restart."""
    mgr = McpManager([toy(tool_overrides={"grow": False, "extra": False}, timeout=10)])
    await mgr.start()
    try:
        combined = Toolset.combine("tapebot", Toolset("builtin"), mgr.toolset)
        mgr.publish_into(combined)
        runtime = AgentRuntime(model_for=lambda _: ScriptedClient([]), tools=combined, store=InMemoryStore())
        assert "toy__big" in runtime._tool_names and "toy__extra" not in runtime._tool_names
        assert await combined.get("toy__grow").call(ToolContext(), {}) == "grown"
        for _ in range(200):
            if "toy__extra" in combined:
                break
            await asyncio.sleep(0.02)
        assert "toy__extra" in combined and "toy__big" not in combined
        assert "toy__extra" in mgr.toolset and "toy__big" not in mgr.toolset
        assert await combined.get("toy__extra").call(ToolContext(), {}) == "extra ran"
        runtime._refresh_schemas()
        assert "toy__extra" in runtime._tool_names and "toy__big" not in runtime._tool_names
    finally:
        await mgr.stop()


async def test_url_servers_send_the_configured_headers_and_bearer_token(tmp_path):
    """tapebot as a client of tapebot's own HTTP server, which wants a bearer token."""
    from tests.mcp.http_server import mcp_http_server

    token = "client-side-token-4c1d"
    with mcp_http_server(tmp_path / "served", token=token) as served:
        cfg = McpServerConfig(
            name="tb", url=served.url, bearer_token_env="TB_TOKEN", headers={"X-Client": "t"}, timeout=20
        )
        assert cfg.resolved_headers({"TB_TOKEN": token}) == {
            "X-Client": "t",
            "Authorization": f"Bearer {token}",
        }
        async with McpManager([cfg], environ={"TB_TOKEN": token}) as mgr:
            assert mgr.status()[0].startswith("tb: ready")
            price = mgr.toolset.get("tb__get_market_price")
            out = await price.call(ToolContext(call_id="c1"), {"code": "600519"})
            assert '"symbol": "600519"' in out
        async with McpManager([cfg], environ={}) as refused:  # the token is not set
            assert refused.connections[0].state == "failed"
            assert "HTTP 401: the server refused the credentials" in refused.connections[0].error


def test_header_secrets_are_masked_like_other_keys():
    from config.settings import Settings

    settings = Settings(
        mcp_servers=[
            McpServerConfig(
                name="s",
                url="http://127.0.0.1:1/mcp",
                bearer_token_env="S_TOKEN",
                headers_env={"X-Key": "S_KEY"},
            )
        ]
    )
    settings.bind_environ({"S_TOKEN": "tok-abcdef123", "S_KEY": "key-zyxwvu987"})
    assert {"tok-abcdef123", "key-zyxwvu987"} <= set(settings.secret_values())
    with pytest.raises(ValueError, match="url servers only"):
        McpServerConfig(name="x", command=["x"], bearer_token_env="T")


async def test_the_calls_clock_stands_still_while_the_user_answers_the_servers_question():
    """A server's question (elicitation) during a call with a 2 s timeout, answered slowly: the
    answers' time does not count against the call's timeout."""
    from agent.elicit import LiveQuestions
    from agent.tools.registry import Deps

    class SlowPerson(LiveQuestions):
        async def ask(self, chat_key, user_id, question, options, timeout):
            await asyncio.sleep(1.5)
            return options[0] if options else "2"

    deps = Deps()
    deps.add(SlowPerson(), as_type=LiveQuestions)
    mgr = McpManager([toy(tool_overrides={"survey": False}, timeout=2)], start_timeout=60)
    await mgr.start()
    try:
        survey = mgr.toolset.get("toy__survey")
        out = await survey.call(ToolContext(chat_key="telegram:1", user_id="1", deps=deps), {})
    finally:
        await mgr.stop()
    assert '"action": "accept"' in out and '"lots": 2' in out  # 4.5 s of answers, a 2 s timeout
