"""Metadata, client construction, the in-process ScriptedClient, and the fake server itself."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from providers_helpers import collect, text_of

from agent.errors import ConfigError, FatalModelError
from agent.messages import Message
from agent.providers import build_model_chain, build_model_client, model_info
from agent.providers.anthropic import AnthropicClient
from agent.providers.base import FinishChunk, ModelRequest, TextChunk, ToolCallChunk
from agent.providers.fallback import FallbackClient
from agent.providers.metadata import infer_context_window, infer_supports_reasoning
from agent.providers.openai import OpenAICompatClient
from agent.providers.scripted import ScriptedClient, ScriptExhausted, reply, tool_call
from tests.fakes.llm_server import Failure, Reply, ScriptedLLMServer, ToolCall

REQ = ModelRequest(messages=[Message.user("hello")])


@pytest.mark.parametrize(
    ("name", "window"),
    [
        ("gemini-2.5-pro", 1_048_576),
        ("gemini-3-flash", 128_000),
        ("claude-sonnet-4-5", 200_000),
        ("anthropic/claude-opus-4-1", 200_000),
        ("gpt-4o-mini", 128_000),
        ("gpt-4.1", 128_000),
        ("o3-mini", 128_000),
        ("openai/o4-mini", 128_000),
        ("gpt-5", 128_000),
        ("gpt-3.5-turbo", 16_384),
        ("deepseek-chat", 65_536),
        ("qwen-max", 128_000),
        ("kimi-k2", 128_000),
        ("moonshot-v1-128k", 128_000),
        ("mistral-large", 128_000),
        ("llama3:8b", 65_536),
        ("totally-unknown", 65_536),
    ],
)
def test_context_window_inference(name, window):
    assert infer_context_window(name) == window


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("claude-sonnet-4-5", True),
        ("claude-3-7-sonnet", True),
        ("claude-3-5-haiku", False),
        ("deepseek-reasoner", True),
        ("deepseek-chat", False),
        ("o3-mini", True),
        ("gpt-4o", False),
        ("qwq-32b", True),
        ("llama3", False),
    ],
)
def test_reasoning_inference(name, expected):
    assert infer_supports_reasoning(name) is expected


def _cfg(**kw):
    base = dict(
        id="main", provider="openai", model="gpt-4o", base_url="http://127.0.0.1:9/v1", api_key="sk-test",
        context_window=None, input_per_1m=2.5, output_per_1m=10.0, max_tokens=4096,
    )  # fmt: skip
    base.update(kw)
    return SimpleNamespace(**base)


async def test_build_model_client_per_provider():
    openai_client = build_model_client(_cfg(), idle_timeout=7)
    anthropic_client = build_model_client(
        _cfg(provider="anthropic", model="claude-sonnet-4-5", context_window=1000)
    )
    try:
        assert isinstance(openai_client, OpenAICompatClient) and openai_client.idle_timeout == 7
        assert openai_client.info.context_window == 128_000
        assert openai_client.info.input_per_1m == 2.5
        assert isinstance(anthropic_client, AnthropicClient)
        assert anthropic_client.info.context_window == 1000  # configured wins
    finally:
        await openai_client.aclose()
        await anthropic_client.aclose()
    with pytest.raises(ConfigError):
        build_model_client(_cfg(provider="gemini"))


def test_reasoning_flag_selects_the_thinking_mode():
    legacy = build_model_client(_cfg(provider="anthropic", model="claude-sonnet-4-5", reasoning=True))
    modern = build_model_client(_cfg(provider="anthropic", model="claude-opus-4-7", reasoning=True))
    assert legacy.thinking == 2048 and modern.thinking == "adaptive"
    assert model_info(_cfg(model="llama3", reasoning=True)).supports_reasoning


async def test_build_from_the_real_model_config(llm_server):
    from config.settings import ModelConfig

    cfg = ModelConfig(
        id="main", provider="openai", model="qwen-max", base_url=llm_server.openai_base_url, api_key="sk-1"
    )
    chain = build_model_chain([cfg], idle_timeout=5)
    llm_server.script(Reply(text="hi there"))
    try:
        assert isinstance(chain, FallbackClient)
        assert text_of(await collect(chain, REQ)) == "hi there"
        assert chain.info.context_window == 128_000
        assert llm_server.requests[0].headers.get("Authorization") == "Bearer sk-1"
    finally:
        await chain.aclose()


def test_importing_providers_does_not_import_the_sdks():
    code = "import sys, agent.providers; print('anthropic' in sys.modules, 'openai' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=os.getcwd()
    )
    assert out.stdout.split() == ["False", "False"]


# ---- ScriptedClient -------------------------------------------------------------------------------
async def test_scripted_client_replays_turns_and_records_requests():
    client = ScriptedClient(
        [
            reply("hello world", pieces=2),
            lambda request: reply(f"you said {request.messages[-1].text}"),
            reply(tool_calls=[("get_quote", {"code": "1"}), tool_call("get_news", {}, call_id="c9")]),
        ]
    )
    first = await collect(client, REQ)
    assert [c.text for c in first if isinstance(c, TextChunk)] == ["hello ", "world"]
    assert text_of(await collect(client, REQ)) == "you said hello"
    third = await collect(client, REQ)
    assert [c.call.name for c in third if isinstance(c, ToolCallChunk)] == ["get_quote", "get_news"]
    assert third[-1] == FinishChunk("tool_calls")
    assert len(client.requests) == 3
    with pytest.raises(ScriptExhausted):
        await collect(client, REQ)


async def test_scripted_client_raises_scripted_errors_and_uses_default():
    client = ScriptedClient([FatalModelError("no")], default=reply("again"))
    with pytest.raises(FatalModelError):
        await collect(client, REQ)
    assert text_of(await collect(client, REQ)) == "again"
    assert text_of(await collect(client, REQ)) == "again"


# ---- the fake server, non-streaming and threaded ------------------------------------------------
async def test_server_non_streaming_responses_work_with_both_sdks(llm_server):
    import anthropic
    import openai

    llm_server.script(
        Reply(text="plain answer", tool_calls=[ToolCall("f", {"a": 1}, id="toolu_1")], cache_read=5),
        Reply(text="plain too", tool_calls=[ToolCall("g", {"b": 2}, id="call_1")], cache_read=4),
    )
    a = anthropic.AsyncAnthropic(api_key="k", base_url=llm_server.url, max_retries=0)
    o = openai.AsyncOpenAI(api_key="k", base_url=llm_server.openai_base_url, max_retries=0)
    try:
        msg = await a.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
        assert msg.content[0].text == "plain answer" and msg.content[1].input == {"a": 1}
        assert msg.stop_reason == "tool_use" and msg.usage.cache_read_input_tokens == 5
        done = await o.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert done.choices[0].message.content == "plain too"
        assert done.choices[0].message.tool_calls[0].function.arguments == '{"b": 2}'
        assert done.usage.prompt_tokens_details.cached_tokens == 4
    finally:
        await a.close()
        await o.close()


async def test_server_reports_an_exhausted_script_as_500(llm_server):
    import openai

    o = openai.AsyncOpenAI(api_key="k", base_url=llm_server.openai_base_url, max_retries=0)
    try:
        with pytest.raises(openai.InternalServerError, match="script exhausted"):
            await o.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    finally:
        await o.close()


def test_server_in_a_thread_serves_the_sync_sdk(llm_server_thread):
    import openai

    llm_server_thread.script(Reply(text="from a thread"), Failure(401))
    client = openai.OpenAI(api_key="k", base_url=llm_server_thread.openai_base_url, max_retries=0)
    try:
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], stream=True
        )
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        assert text == "from a thread"
        with pytest.raises(openai.AuthenticationError):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    finally:
        client.close()
    assert len(llm_server_thread.requests) == 2


async def test_server_closes_promptly_while_a_handler_stalls():
    import asyncio

    import openai

    server = ScriptedLLMServer()
    await server.start()
    server.script(Reply(text="x", stall_before=60))
    o = openai.AsyncOpenAI(api_key="k", base_url=server.openai_base_url, max_retries=0)
    call = asyncio.create_task(
        o.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    )
    while not server.requests:
        await asyncio.sleep(0.01)
    await asyncio.wait_for(server.close(), 5)
    with pytest.raises(openai.APIError):
        await call
    await o.close()
