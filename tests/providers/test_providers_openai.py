"""OpenAICompatClient against the scripted server through the real `openai` SDK."""

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
from agent.providers.openai import ToolTagFilter, to_wire_messages
from agent.usage import Usage
from tests.fakes.llm_server import Failure, Reply, ToolCall


def calls_of(chunks) -> list[ToolCallPart]:
    return [c.call for c in chunks if isinstance(c, ToolCallChunk)]


async def test_text_streams_with_usage_split_into_cached_and_uncached(llm_server, make_client):
    llm_server.script(Reply(text="Markets closed higher.", input_tokens=18, cache_read=32, output_tokens=9))
    chunks = await collect(make_client("openai"), req())
    assert len([c for c in chunks if isinstance(c, TextChunk)]) > 1
    assert text_of(chunks) == "Markets closed higher."
    assert chunks[-2] == UsageChunk(Usage(input_tokens=18, output_tokens=9, cache_read_tokens=32))
    assert chunks[-1] == FinishChunk("stop")
    body = llm_server.requests[0].body
    assert body["stream_options"] == {"include_usage": True}


async def test_multi_part_tool_calls_are_assembled_by_index(llm_server, make_client):
    llm_server.script(
        Reply(
            tool_calls=[
                ToolCall("get_quote", {"code": "600519"}, id="call_a", fragments=4),
                ToolCall("get_news", {"q": "茅台"}, id="call_b", fragments=2),
            ]
        )
    )
    chunks = await collect(make_client("openai"), req(tools=TOOLS))
    assert [(c.id, c.name, c.arguments) for c in calls_of(chunks)] == [
        ("call_a", "get_quote", {"code": "600519"}),
        ("call_b", "get_news", {"q": "茅台"}),
    ]
    assert chunks[-1] == FinishChunk("tool_calls")
    body = llm_server.requests[0].body
    assert body["tool_choice"] == "auto"
    assert body["tools"][0] == {
        "type": "function",
        "function": {"name": "get_quote", "description": "Latest quote", "parameters": TOOLS[0].parameters},
    }


async def test_invalid_tool_json_gives_arguments_none(llm_server, make_client):
    llm_server.script(Reply(tool_calls=[ToolCall("get_quote", '{"code": 600519', id="call_x")]))
    chunks = await collect(make_client("openai"), req(tools=TOOLS))
    (call,) = calls_of(chunks)
    assert call.arguments is None and call.raw_arguments == '{"code": 600519'


async def test_non_object_tool_json_gives_arguments_none(llm_server, make_client):
    llm_server.script(Reply(tool_calls=[ToolCall("get_quote", "[1, 2]")]))
    (call,) = calls_of(await collect(make_client("openai"), req(tools=TOOLS)))
    assert call.arguments is None


async def test_reasoning_content_streams_as_thinking_and_is_echoed_back(llm_server, make_client):
    client = make_client("openai", model="deepseek-reasoner")
    llm_server.script(
        Reply(thinking="Check the price first.", tool_calls=[ToolCall("get_quote", {"code": "1"})])
    )
    first = req(Message.user("price?"), tools=TOOLS)
    chunks = await collect(client, first)
    thinking = "".join(c.text for c in chunks if isinstance(c, ThinkingChunk))
    assert thinking == "Check the price first."
    (call,) = calls_of(chunks)
    history = [
        *first.messages,
        Message.assistant("", tool_calls=[call], thinking=[ThinkingPart(text=thinking)]),
        Message.tool_result(call.id, call.name, "1500"),
    ]
    llm_server.script(Reply(text="1500."))
    await collect(client, req(*history, tools=TOOLS))
    sent = llm_server.requests[1].body["messages"]
    assistant = next(m for m in sent if m["role"] == "assistant")
    assert assistant["reasoning_content"] == "Check the price first."
    assert assistant["tool_calls"][0]["id"] == call.id
    assert sent[-1] == {"role": "tool", "tool_call_id": call.id, "content": "1500"}


def test_wire_messages_mapping():
    history = [
        Message.user("q"),
        Message(
            role="assistant",
            parts=(
                ThinkingPart(text="anthropic thinking", signature="sig"),
                TextPart(text="checking"),
                ToolCallPart(id="c1", name="get_quote", arguments={"code": "1"}),
                ToolCallPart(id="c2", name="get_news", arguments=None, raw_arguments="{oops"),
            ),
        ),
        Message.tool_result("c1", "get_quote", "ok"),
        Message.tool_result("c2", "get_news", "arguments are not valid JSON", is_error=True),
    ]
    wire = to_wire_messages(history, "STATIC", "dynamic")
    assert wire[0] == {"role": "system", "content": "STATIC\n\ndynamic"}
    assistant = wire[2]
    assert "reasoning_content" not in assistant  # signed (Anthropic) thinking is not echoed
    assert assistant["content"] == "checking"
    assert [tc["function"]["arguments"] for tc in assistant["tool_calls"]] == ['{"code": "1"}', "{}"]
    assert wire[3] == {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    assert wire[4]["content"] == "Error: arguments are not valid JSON"


# ---- <tool_call> in text ------------------------------------------------------------------------
async def test_tool_call_tags_in_text_become_tool_calls_and_never_show(llm_server, make_client):
    pieces = [
        "Let me ",
        "check. <to",
        'ol_call>{"name": "get_quote", ',
        '"arguments": {"code": "600519"}}</tool',
        "_call>",
        " Done.",
    ]
    llm_server.script(Reply(text=pieces))
    chunks = await collect(make_client("openai"), req(tools=TOOLS))
    texts = [c.text for c in chunks if isinstance(c, TextChunk)]
    assert "".join(texts) == "Let me check.  Done."
    assert not any("<" in t or "tool_call" in t for t in texts)
    (call,) = calls_of(chunks)
    assert (call.name, call.arguments) == ("get_quote", {"code": "600519"})
    assert chunks[-1] == FinishChunk("tool_calls")


async def test_native_tool_calls_win_over_tags(llm_server, make_client):
    tag = '<tool_call>{"name": "get_news", "arguments": {}}</tool_call>'
    llm_server.script(
        Reply(text=["ok ", tag], tool_calls=[ToolCall("get_quote", {"code": "1"}, id="call_n")])
    )
    chunks = await collect(make_client("openai"), req(tools=TOOLS))
    assert [c.id for c in calls_of(chunks)] == ["call_n"]
    assert text_of(chunks) == "ok "


def test_tag_filter_passes_ordinary_angle_brackets_and_keeps_bad_blocks_as_text():
    f = ToolTagFilter()
    out = f.feed("a < b and c <") + f.feed("= d <tool_call>not json</tool_call> end <tool") + f.flush()
    assert out == "a < b and c <= d <tool_call>not json</tool_call> end <tool"
    assert f.calls == []


def test_tag_filter_parses_string_arguments_and_unterminated_block_stays_text():
    f = ToolTagFilter()
    out = f.feed('<tool_call>{"name": "x", "arguments": "{\\"a\\": 1}"}</tool_call>')
    assert out == "" and f.calls[0].arguments == {"a": 1}
    g = ToolTagFilter()
    assert g.feed("hi <tool_call>{") + g.flush() == "hi <tool_call>{"
    assert g.calls == []


# ---- compatibility downgrades -------------------------------------------------------------------
async def test_rejected_stream_options_is_dropped_and_remembered(llm_server, make_client):
    client = make_client("openai")
    body = {"error": {"message": "Unrecognized request argument supplied: stream_options", "type": "invalid"}}
    llm_server.script(Failure(400, body=body), Reply(text="one"), Reply(text="two"))
    assert text_of(await collect(client, req(tools=TOOLS))) == "one"
    assert text_of(await collect(client, req(tools=TOOLS))) == "two"
    sent = [r.body for r in llm_server.requests]
    assert "stream_options" in sent[0]
    assert "stream_options" not in sent[1] and sent[1]["tool_choice"] == "auto"
    assert "stream_options" not in sent[2]  # remembered for the client's lifetime


async def test_rejected_tool_choice_is_dropped(llm_server, make_client):
    client = make_client("openai")
    body = {"error": {"message": "tool_choice is not supported", "type": "invalid"}}
    llm_server.script(Failure(400, body=body), Reply(text="ok"))
    await collect(client, req(tools=TOOLS))
    sent = [r.body for r in llm_server.requests]
    assert "tool_choice" not in sent[1] and sent[1]["stream_options"] == {"include_usage": True}


async def test_unexplained_400s_on_first_try_drop_both_in_turn(llm_server, make_client):
    client = make_client("openai")
    llm_server.script(Failure(400), Failure(400), Reply(text="ok"), Reply(text="again"))
    assert text_of(await collect(client, req(tools=TOOLS))) == "ok"
    await collect(client, req(tools=TOOLS))
    sent = [r.body for r in llm_server.requests]
    assert ("stream_options" in sent[0], "tool_choice" in sent[0]) == (True, True)
    assert ("stream_options" in sent[1], "tool_choice" in sent[1]) == (False, True)
    assert ("stream_options" in sent[2], "tool_choice" in sent[2]) == (False, False)
    assert ("stream_options" in sent[3], "tool_choice" in sent[3]) == (False, False)


async def test_a_400_that_no_downgrade_fixes_is_fatal_and_not_remembered(llm_server, make_client):
    client = make_client("openai")
    body = {"error": {"message": "prompt is too long", "type": "invalid_request_error"}}
    llm_server.script(
        Failure(400, body=body), Failure(400, body=body), Failure(400, body=body), Reply(text="ok")
    )
    with pytest.raises(FatalModelError) as info:
        await collect(client, req(tools=TOOLS))
    assert "prompt is too long" in str(info.value)
    await collect(client, req(tools=TOOLS))
    assert "stream_options" in llm_server.requests[-1].body  # nothing was downgraded for good


async def test_after_a_verified_call_a_400_is_fatal_at_once(llm_server, make_client):
    client = make_client("openai")
    llm_server.script(Reply(text="ok"), Failure(400, body={"error": {"message": "context length exceeded"}}))
    await collect(client, req(tools=TOOLS))
    with pytest.raises(FatalModelError):
        await collect(client, req(tools=TOOLS))
    assert len(llm_server.requests) == 2


async def test_max_completion_tokens_downgrade(llm_server, make_client):
    body = {"error": {"message": "Unsupported parameter: 'max_tokens'; use 'max_completion_tokens' instead."}}
    llm_server.script(Failure(400, body=body), Reply(text="ok"))
    await collect(make_client("openai", model="o4-mini"), req(max_tokens=500))
    sent = llm_server.requests[1].body
    assert sent["max_completion_tokens"] == 500 and "max_tokens" not in sent


# ---- errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("status", [401, 403, 404])
async def test_client_errors_are_fatal_without_downgrade_retries(llm_server, make_client, status):
    llm_server.script(Failure(status))
    with pytest.raises(FatalModelError):
        await collect(make_client("openai"), req(tools=TOOLS))
    assert len(llm_server.requests) == 1


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_server_errors_are_retryable(llm_server, make_client, status):
    llm_server.script(Failure(status))
    with pytest.raises(RetryableModelError) as info:
        await collect(make_client("openai"), req())
    assert info.value.status == status


async def test_rate_limit_carries_retry_after(llm_server, make_client):
    llm_server.script(Failure(429, retry_after="2"))
    with pytest.raises(RateLimited) as info:
        await collect(make_client("openai"), req())
    assert info.value.retry_after == 2.0


async def test_insufficient_quota_is_fatal(llm_server, make_client):
    body = {"error": {"message": "You exceeded your current quota", "type": "insufficient_quota"}}
    llm_server.script(Failure(429, body=body))
    with pytest.raises(FatalModelError):
        await collect(make_client("openai"), req())


@pytest.mark.parametrize("mode", ["error", "disconnect"])
async def test_failure_after_text_is_interrupted(llm_server, make_client, mode):
    llm_server.script(Reply(text="alpha beta gamma", fail_after=1, fail_mode=mode))
    got: list = []
    with pytest.raises(StreamInterrupted):
        await collect(make_client("openai"), req(), into=got)
    assert text_of(got) == "alpha "


async def test_error_frame_before_output_is_retryable(llm_server, make_client):
    llm_server.script(Reply(text="x", fail_after=0))
    with pytest.raises(RetryableModelError) as info:
        await collect(make_client("openai"), req())
    assert not isinstance(info.value, StreamInterrupted)


async def test_stall_before_first_token_is_stalled(llm_server, make_client):
    llm_server.script(Reply(text="late", stall_after=0))
    with pytest.raises(StreamStalled):
        await collect(make_client("openai", idle_timeout=0.3), req())


async def test_stall_after_text_is_interrupted(llm_server, make_client):
    llm_server.script(Reply(text="partial answer", stall_after=1))
    got: list = []
    with pytest.raises(StreamInterrupted):
        await collect(make_client("openai", idle_timeout=0.3), req(), into=got)
    assert text_of(got) == "partial "


async def test_partial_tool_call_is_never_yielded_when_the_stream_breaks(llm_server, make_client):
    llm_server.script(
        Reply(tool_calls=[ToolCall("get_quote", {"code": "600519"}, fragments=4)], fail_after=3)
    )
    got: list = []
    with pytest.raises(RetryableModelError):
        await collect(make_client("openai"), req(tools=TOOLS), into=got)
    assert calls_of(got) == []


async def test_cleanly_truncated_stream_is_an_error_not_an_answer(llm_server, make_client):
    llm_server.script(
        Reply(text="half an", fail_after=1, fail_mode="truncate"),
        Reply(text="x", fail_after=0, fail_mode="truncate"),
    )
    client = make_client("openai")
    with pytest.raises(StreamInterrupted):
        await collect(client, req())
    with pytest.raises(RetryableModelError) as info:
        await collect(client, req())
    assert not isinstance(info.value, StreamInterrupted)
