"""FallbackClient over real SDK clients talking to the scripted server (two models, one server)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from providers_helpers import collect, text_of

from agent.errors import FatalModelError, RateLimited, RetryableModelError, StreamInterrupted
from agent.messages import Message
from agent.providers.base import ModelInfo, ModelRequest, TextChunk, ToolCallChunk, UsageChunk
from agent.providers.fallback import FallbackClient
from agent.providers.scripted import ScriptedClient, reply
from agent.usage import Usage
from tests.fakes.clock import FakeClock
from tests.fakes.llm_server import Failure, Reply, ToolCall
from tests.fakes.recorder import Recorder

REQ = ModelRequest(messages=[Message.user("hello")])


@dataclass
class Observed:
    """What a FallbackClient reports: each switch (model_from, model_to, reason) and each backoff sleep."""

    switch: Recorder = field(default_factory=Recorder)
    clock: FakeClock = field(default_factory=FakeClock)


@pytest.fixture
def rec() -> Observed:
    return Observed()


@pytest.fixture
def chain(make_client, rec):
    """chain(vendor_a, vendor_b, idle_timeout=...) -> FallbackClient over models "primary"/"backup"."""

    def make(
        first: str = "anthropic", second: str = "openai", *, idle_timeout: float = 5.0, **kw
    ) -> FallbackClient:
        clients = [
            make_client(first, model="primary", id="main", idle_timeout=idle_timeout),
            make_client(second, model="backup", id="backup", idle_timeout=idle_timeout),
        ]
        return FallbackClient(clients, on_switch=rec.switch.sync, sleep=rec.clock.sleep, **kw)

    return make


@pytest.mark.parametrize(("first", "second"), [("anthropic", "openai"), ("openai", "anthropic")])
async def test_500_switches_to_the_backup(llm_server, chain, rec, first, second):
    client = chain(first, second)
    llm_server.script(Failure(500), model="primary")
    llm_server.script(Reply(text="from backup"), model="backup")
    chunks = await collect(client, REQ)
    assert text_of(chunks) == "from backup"
    assert [(f, t) for f, t, _ in rec.switch.calls] == [("main", "backup")]
    assert "500" in rec.switch.calls[0][2]
    assert client.info.id == "backup"  # usage of this stream belongs to the backup
    assert [r.model for r in llm_server.requests] == ["primary", "backup"]


async def test_info_is_the_primary_before_any_call_and_again_once_it_has_rested(llm_server, chain):
    clock = FakeClock()
    client = chain(clock=clock.monotonic, cooldown_s=60.0)
    assert client.info.id == "main"
    llm_server.script(Failure(503), Reply(text="ok"), model="primary")
    llm_server.script(Reply(text="b"), model="backup")
    await collect(client, REQ)
    assert client.info.id == "backup"
    clock.advance(61)
    await collect(client, REQ)
    assert client.info.id == "main"


async def test_429_with_short_retry_after_retries_the_same_model_once(llm_server, chain, rec):
    client = chain()
    llm_server.script(Failure(429, retry_after="2"), Reply(text="primary ok"), model="primary")
    chunks = await collect(client, REQ)
    assert text_of(chunks) == "primary ok"
    assert rec.clock.sleeps == [2.0]
    assert [(f, t) for f, t, _ in rec.switch.calls] == [("main", "main")]
    assert llm_server.requests_for("backup") == []


async def test_429_twice_moves_on(llm_server, chain, rec):
    client = chain()
    llm_server.script(Failure(429, retry_after="1"), Failure(429, retry_after="1"), model="primary")
    llm_server.script(Reply(text="b"), model="backup")
    assert text_of(await collect(client, REQ)) == "b"
    assert rec.clock.sleeps == [1.0]
    assert [(f, t) for f, t, _ in rec.switch.calls] == [("main", "main"), ("main", "backup")]


async def test_429_with_long_retry_after_moves_on_at_once(llm_server, chain, rec):
    client = chain(retry_after_cap=10)
    llm_server.script(Failure(429, retry_after="3600"), model="primary")
    llm_server.script(Reply(text="b"), model="backup")
    assert text_of(await collect(client, REQ)) == "b"
    assert rec.clock.sleeps == []


async def test_stall_before_first_token_switches(llm_server, chain, rec):
    client = chain(idle_timeout=0.3)
    llm_server.script(Reply(text="never", stall_after=0), model="primary")
    llm_server.script(Reply(text="backup answer"), model="backup")
    assert text_of(await collect(client, REQ)) == "backup answer"
    assert "idle timeout" in rec.switch.calls[0][2]


async def test_no_fallback_on_401(llm_server, chain, rec):
    client = chain()
    llm_server.script(Failure(401), model="primary")
    llm_server.script(Reply(text="must not be used"), model="backup")
    with pytest.raises(FatalModelError):
        await collect(client, REQ)
    assert llm_server.requests_for("backup") == []
    assert rec.switch.calls == []


@pytest.mark.parametrize("first", ["anthropic", "openai"])
async def test_failure_mid_stream_is_not_replayed(llm_server, chain, rec, first):
    client = chain(first, "openai")
    llm_server.script(Reply(text="The price of 600519 is", fail_after=3), model="primary")
    llm_server.script(Reply(text="The price of 600519 is 1500."), model="backup")
    got: list = []
    with pytest.raises(StreamInterrupted):
        await collect(client, REQ, into=got)
    assert text_of(got) == "The price of "  # delivered once, never duplicated
    assert llm_server.requests_for("backup") == []
    assert rec.switch.calls == []


async def test_stall_after_output_is_not_replayed(llm_server, chain):
    client = chain(idle_timeout=0.3)
    llm_server.script(Reply(text="one two three", stall_after=1), model="primary")
    llm_server.script(Reply(text="x"), model="backup")
    with pytest.raises(StreamInterrupted):
        await collect(client, REQ)
    assert llm_server.requests_for("backup") == []


async def test_all_models_failing_raises_the_last_error(llm_server, chain, rec):
    client = chain()
    llm_server.script(Failure(500), model="primary")
    llm_server.script(Failure(529), model="backup")
    with pytest.raises(RetryableModelError) as info:
        await collect(client, REQ)
    assert info.value.model == "backup"


async def test_tool_call_history_crosses_vendors(llm_server, chain):
    """A conversation with tool calls continues on the other vendor with ids intact."""
    client = chain("anthropic", "openai")
    llm_server.script(Reply(tool_calls=[ToolCall("get_quote", {"code": "1"}, id="toolu_9")]), model="primary")
    chunks = await collect(client, REQ)
    (call,) = [c.call for c in chunks if isinstance(c, ToolCallChunk)]
    history = [
        *REQ.messages,
        Message.assistant("", tool_calls=[call]),
        Message.tool_result(call.id, call.name, "9"),
    ]
    llm_server.script(Failure(529), model="primary")
    llm_server.script(Reply(text="9 it is"), model="backup")
    await collect(client, ModelRequest(messages=history))
    sent = llm_server.requests_for("backup")[0].body["messages"]
    assert sent[1]["tool_calls"][0]["id"] == "toolu_9"
    assert sent[2] == {"role": "tool", "tool_call_id": "toolu_9", "content": "9"}


# ---- with in-process scripted clients -----------------------------------------------------------
def scripted(name: str, *turns) -> ScriptedClient:
    return ScriptedClient(turns, info=ModelInfo(id=name, model=name, provider="scripted"))


async def test_retryable_error_after_output_from_a_careless_client_becomes_interrupted(rec):
    a = scripted("a", [TextChunk("partial"), RetryableModelError("boom")])
    b = scripted("b", reply("full"))
    client = FallbackClient([a, b], on_switch=rec.switch.sync, sleep=rec.clock.sleep)
    with pytest.raises(StreamInterrupted):
        await collect(client, REQ)
    assert b.requests == []


async def test_usage_chunks_do_not_count_as_output(rec):
    a = scripted("a", [UsageChunk(Usage(1, 0)), RetryableModelError("boom")])
    b = scripted("b", reply("full"))
    client = FallbackClient([a, b], on_switch=rec.switch.sync, sleep=rec.clock.sleep)
    assert text_of(await collect(client, REQ)) == "full"


async def test_single_model_rate_limit_without_retry_after_waits_a_little_then_retries(rec):
    a = scripted("a", RateLimited("slow down"), reply("ok"))
    client = FallbackClient([a], on_switch=rec.switch.sync, sleep=rec.clock.sleep, default_wait=0.5)
    assert text_of(await collect(client, REQ)) == "ok"
    assert rec.clock.sleeps == [0.5]


async def test_async_switch_callback_is_awaited():
    seen = []

    async def on_switch(model_from, model_to, reason):
        seen.append((model_from, model_to))

    client = FallbackClient(
        [scripted("a", RetryableModelError("x")), scripted("b", reply("ok"))], on_switch=on_switch
    )
    await collect(client, REQ)
    assert seen == [("a", "b")]


async def test_aclose_closes_every_client():
    a, b = scripted("a"), scripted("b")
    await FallbackClient([a, b]).aclose()
    assert a.closed and b.closed


# ---- cooldown (circuit breaker) and the one retry without a fallback -----------------------------
async def test_a_failed_primary_cools_down_so_the_next_turns_go_straight_to_the_backup(
    llm_server, chain, rec
):
    clock = FakeClock()
    client = chain(clock=clock.monotonic, cooldown_s=60.0)
    llm_server.script(Failure(500), model="primary")
    llm_server.script(Reply(text="b1"), Reply(text="b2"), Reply(text="b3"), model="backup")
    assert text_of(await collect(client, REQ)) == "b1"
    clock.advance(30)
    assert text_of(await collect(client, REQ)) == "b2"  # primary not even tried
    assert [r.model for r in llm_server.requests] == ["primary", "backup", "backup"]
    clock.advance(31)  # cooldown over: the primary gets another chance
    llm_server.script(Reply(text="p"), model="primary")
    assert text_of(await collect(client, REQ)) == "p"
    assert [r.model for r in llm_server.requests][-1] == "primary"


async def test_a_hanging_primary_is_not_waited_for_again_on_the_next_turn(llm_server, chain, rec):
    clock = FakeClock()
    client = chain(idle_timeout=0.3, clock=clock.monotonic)
    llm_server.script(Reply(text="never", stall_after=0), model="primary")
    llm_server.script(Reply(text="b1"), Reply(text="b2"), model="backup")
    assert text_of(await collect(client, REQ)) == "b1"
    assert text_of(await collect(client, REQ)) == "b2"
    assert len(llm_server.requests_for("primary")) == 1


async def test_cooldown_grows_while_the_primary_keeps_failing_and_resets_on_success(llm_server, chain):
    clock = FakeClock()
    client = chain(clock=clock.monotonic, cooldown_s=10.0)
    llm_server.script(Failure(503), Failure(503), Reply(text="p"), model="primary")
    llm_server.script(Reply(text="b"), Reply(text="b"), Reply(text="b"), model="backup")
    await collect(client, REQ)  # primary fails: 10 s
    clock.advance(11)
    await collect(client, REQ)  # tried again, fails again: 20 s
    clock.advance(11)
    await collect(client, REQ)  # still cooling down: backup
    assert len(llm_server.requests_for("primary")) == 2
    clock.advance(10)
    assert text_of(await collect(client, REQ)) == "p"


async def test_with_no_fallback_a_500_is_retried_once_after_a_backoff(llm_server, make_client, rec):
    only = make_client("openai", model="primary", id="main")
    client = FallbackClient([only], on_switch=rec.switch.sync, sleep=rec.clock.sleep)
    llm_server.script(Failure(500), Reply(text="second try"), model="primary")
    assert text_of(await collect(client, REQ)) == "second try"
    assert len(rec.clock.sleeps) == 1 and rec.clock.sleeps[0] > 0


async def test_with_no_fallback_two_500s_fail(llm_server, make_client, rec):
    only = make_client("anthropic", model="primary", id="main")
    client = FallbackClient([only], on_switch=rec.switch.sync, sleep=rec.clock.sleep)
    llm_server.script(Failure(500), Failure(502), Reply(text="not reached"), model="primary")
    with pytest.raises(RetryableModelError):
        await collect(client, REQ)
    assert len(llm_server.requests_for("primary")) == 2


async def test_a_single_model_is_tried_even_while_it_cools_down():
    clock = FakeClock()
    a = scripted("a", RetryableModelError("x"), RetryableModelError("x"), reply("ok"))
    client = FallbackClient([a], clock=clock.monotonic, sleep=FakeClock().sleep)
    with pytest.raises(RetryableModelError):
        await collect(client, REQ)
    assert text_of(await collect(client, REQ)) == "ok"
