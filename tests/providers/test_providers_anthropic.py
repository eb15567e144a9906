"""AnthropicClient against the scripted server through the real `anthropic` SDK."""

from __future__ import annotations

import pytest
from providers_helpers import TOOLS, collect, req, text_of

from agent.errors import FatalModelError, RateLimited, RetryableModelError, StreamInterrupted, StreamStalled
from agent.messages import Message, TextPart, ThinkingPart, ToolCallPart
from agent.providers.base import (
    FinishChunk,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageChunk,
)
from agent.usage import Usage
from tests.fakes.llm_server import Failure, Reply, ToolCall


async def test_text_streams_as_several_deltas_with_usage_and_finish(llm_server, make_client):
    llm_server.script(Reply(text="The market is open today.", input_tokens=30, output_tokens=9))
    chunks = await collect(make_client("anthropic"), req())
    texts = [c for c in chunks if isinstance(c, TextChunk)]
    assert len(texts) > 1
    assert text_of(chunks) == "The market is open today."
    assert chunks[-2] == UsageChunk(Usage(input_tokens=30, output_tokens=9))
    assert chunks[-1] == FinishChunk("stop")


async def test_multi_part_tool_calls_are_assembled(llm_server, make_client):
    llm_server.script(
        Reply(
            text="Checking.",
            tool_calls=[
                ToolCall("get_quote", {"code": "600519", "market": "SH"}, id="toolu_a", fragments=4),
                ToolCall("get_news", {"q": "贵州茅台 earnings"}, id="toolu_b", fragments=3),
            ],
        )
    )
    chunks = await collect(make_client("anthropic"), req(tools=TOOLS))
    calls = [c.call for c in chunks if isinstance(c, ToolCallChunk)]
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("toolu_a", "get_quote", {"code": "600519", "market": "SH"}),
        ("toolu_b", "get_news", {"q": "贵州茅台 earnings"}),
    ]
    assert chunks[-1] == FinishChunk("tool_calls")
    assert llm_server.requests[0].body["tools"][0] == {
        "name": "get_quote",
        "description": "Latest quote",
        "input_schema": TOOLS[0].parameters,
    }


async def test_tool_call_without_arguments_gets_empty_object(llm_server, make_client):
    llm_server.script(Reply(tool_calls=[ToolCall("get_news", {})]))
    chunks = await collect(make_client("anthropic"), req(tools=TOOLS))
    (call,) = [c.call for c in chunks if isinstance(c, ToolCallChunk)]
    assert call.arguments == {}


async def test_invalid_tool_json_gives_arguments_none(llm_server, make_client):
    llm_server.script(Reply(tool_calls=[ToolCall("get_quote", '{"code": "600519",', id="toolu_x")]))
    chunks = await collect(make_client("anthropic"), req(tools=TOOLS))
    (call,) = [c.call for c in chunks if isinstance(c, ToolCallChunk)]
    assert call.arguments is None
    assert call.raw_arguments == '{"code": "600519",'


async def test_thinking_streams_and_closes_with_its_signature(llm_server, make_client):
    llm_server.script(Reply(thinking="Let me look at the trend.", signature="sig-abc", text="Up."))
    chunks = await collect(make_client("anthropic"), req())
    thinking = [c for c in chunks if isinstance(c, ThinkingChunk)]
    assert "".join(c.text for c in thinking) == "Let me look at the trend."
    assert thinking[-1] == ThinkingChunk("", signature="sig-abc")
    assert all(c.signature is None for c in thinking[:-1])


async def test_usage_reports_cache_read_and_write(llm_server, make_client):
    llm_server.script(Reply(text="ok", input_tokens=12, output_tokens=25, cache_read=2000, cache_write=100))
    chunks = await collect(make_client("anthropic"), req())
    (usage,) = [c.usage for c in chunks if isinstance(c, UsageChunk)]
    assert usage == Usage(input_tokens=12, output_tokens=25, cache_read_tokens=2000, cache_write_tokens=100)


async def test_max_tokens_maps_to_length(llm_server, make_client):
    llm_server.script(Reply(text="cut", finish="length"))
    chunks = await collect(make_client("anthropic"), req())
    assert chunks[-1] == FinishChunk("length")


async def test_wire_request_cache_breakpoints_and_history_mapping(llm_server, make_client):
    history = [
        Message.user("How is 600519?"),
        Message(
            role="assistant",
            parts=(
                ThinkingPart(text="signed reasoning", signature="sig-1"),
                ThinkingPart(text="deepseek reasoning, unsigned"),
                TextPart(text="Let me check."),
                ToolCallPart(id="toolu_1", name="get_quote", arguments={"code": "600519"}),
                ToolCallPart(id="toolu_2", name="get_news", arguments=None, raw_arguments="{bad"),
            ),
        ),
        Message.tool_result("toolu_1", "get_quote", "1500.0"),
        Message.tool_result("toolu_2", "get_news", "invalid JSON arguments", is_error=True),
    ]
    llm_server.script(Reply(text="It is 1500."))
    await collect(
        make_client("anthropic"), req(*history, tools=TOOLS, system="STATIC", system_dynamic="Today")
    )
    body = llm_server.requests[0].body
    assert body["system"] == [
        {"type": "text", "text": "STATIC", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Today"},
    ]
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assistant = messages[1]["content"]
    assert assistant[0] == {"type": "thinking", "thinking": "signed reasoning", "signature": "sig-1"}
    assert [b["type"] for b in assistant] == ["thinking", "text", "tool_use", "tool_use"]  # unsigned dropped
    assert assistant[3]["input"] == {}
    results = messages[2]["content"]  # both results merged into one user message
    assert [(b["type"], b["tool_use_id"], b.get("is_error", False)) for b in results] == [
        ("tool_result", "toolu_1", False),
        ("tool_result", "toolu_2", True),
    ]
    # The sliding breakpoint: only on the last block of the newest message (plus the system block).
    marked = [
        (i, j) for i, m in enumerate(messages) for j, b in enumerate(m["content"]) if "cache_control" in b
    ]
    assert marked == [(2, 1)]


async def test_breakpoint_slides_to_the_newest_message(llm_server, make_client):
    client = make_client("anthropic")
    llm_server.script(Reply(text="one"), Reply(text="two"))
    first = [Message.user("q1")]
    await collect(client, req(*first))
    second = [*first, Message.assistant("one"), Message.user("q2")]
    await collect(client, req(*second))
    msgs = llm_server.requests[1].body["messages"]
    assert "cache_control" not in msgs[0]["content"][0]
    assert msgs[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "system" not in llm_server.requests[1].body  # no empty system blocks


async def test_max_tokens_cap_and_no_sampling_parameters(llm_server, make_client):
    llm_server.script(Reply(text="x"))
    await collect(make_client("anthropic", max_tokens=1000), req(temperature=0.2, max_tokens=4000))
    body = llm_server.requests[0].body
    assert body["max_tokens"] == 1000
    assert "temperature" not in body  # API 2026-10-21 rejects sampling parameters


@pytest.mark.parametrize(
    ("thinking", "expected"),
    [("adaptive", {"type": "adaptive"}), (2048, {"type": "enabled", "budget_tokens": 2048})],
)
async def test_thinking_setting_is_sent(llm_server, make_client, thinking, expected):
    llm_server.script(Reply(text="x"))
    await collect(make_client("anthropic", thinking=thinking), req())
    body = llm_server.requests[0].body
    assert body["thinking"] == expected
    if isinstance(thinking, int):
        assert body["max_tokens"] > thinking


# ---- errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("status", [400, 401, 403, 404])
async def test_client_errors_are_fatal(llm_server, make_client, status):
    llm_server.script(Failure(status))
    with pytest.raises(FatalModelError) as info:
        await collect(make_client("anthropic"), req())
    assert info.value.status == status


@pytest.mark.parametrize("status", [500, 503, 529])
async def test_server_errors_are_retryable(llm_server, make_client, status):
    llm_server.script(Failure(status))
    with pytest.raises(RetryableModelError) as info:
        await collect(make_client("anthropic"), req())
    assert not isinstance(info.value, StreamInterrupted)
    assert info.value.status == status


async def test_rate_limit_carries_retry_after(llm_server, make_client):
    llm_server.script(Failure(429, retry_after="7"))
    with pytest.raises(RateLimited) as info:
        await collect(make_client("anthropic"), req())
    assert info.value.retry_after == 7.0


async def test_spend_limit_429_is_fatal(llm_server, make_client):
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": "enforced_spend_limit reached"}}
    llm_server.script(Failure(429, body=body))
    with pytest.raises(FatalModelError):
        await collect(make_client("anthropic"), req())


async def test_error_event_before_output_is_retryable(llm_server, make_client):
    llm_server.script(Reply(text="never sent", fail_after=0))
    with pytest.raises(RetryableModelError):
        await collect(make_client("anthropic"), req())


@pytest.mark.parametrize("mode", ["error", "disconnect"])
async def test_failure_after_text_is_interrupted(llm_server, make_client, mode):
    llm_server.script(Reply(text="one two three four", fail_after=2, fail_mode=mode))
    got: list = []
    with pytest.raises(StreamInterrupted):
        await collect(make_client("anthropic"), req(), into=got)
    assert text_of(got) == "one two "


async def test_stall_before_headers_is_stalled(llm_server, make_client):
    llm_server.script(Reply(text="late", stall_before=30))
    with pytest.raises(StreamStalled):
        await collect(make_client("anthropic", idle_timeout=0.3), req())


async def test_stall_after_headers_before_content_is_stalled(llm_server, make_client):
    llm_server.script(Reply(text="late", stall_after=0))
    with pytest.raises(StreamStalled):
        await collect(make_client("anthropic", idle_timeout=0.3), req())


async def test_stall_after_text_is_interrupted(llm_server, make_client):
    llm_server.script(Reply(text="partial answer here", stall_after=1))
    got: list = []
    with pytest.raises(StreamInterrupted):
        await collect(make_client("anthropic", idle_timeout=0.3), req(), into=got)
    assert text_of(got) == "partial "


async def test_connection_refused_is_retryable(make_client):
    from agent.providers.anthropic import AnthropicClient
    from agent.providers.base import ModelInfo

    client = AnthropicClient(
        ModelInfo(id="x", model="claude-x", provider="anthropic"), "k", "http://127.0.0.1:9"
    )
    try:
        with pytest.raises(RetryableModelError):
            await collect(client, req())
    finally:
        await client.aclose()


async def test_cleanly_truncated_stream_is_an_error_not_an_answer(llm_server, make_client):
    llm_server.script(
        Reply(text="half an", fail_after=1, fail_mode="truncate"),
        Reply(text="x", fail_after=0, fail_mode="truncate"),
    )
    client = make_client("anthropic")
    with pytest.raises(StreamInterrupted):
        await collect(client, req())
    with pytest.raises(RetryableModelError) as info:
        await collect(client, req())
    assert not isinstance(info.value, StreamInterrupted)
