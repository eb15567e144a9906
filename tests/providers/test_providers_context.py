"""Per-call context goes after the stored conversation and after the cache breakpoint."""

from agent.messages import Message
from agent.providers.anthropic import to_wire_messages as anthropic_wire
from agent.providers.openai import to_wire_messages as openai_wire


def test_anthropic_context_follows_the_cache_breakpoint():
    msgs = [Message.user("first"), Message.assistant("answer"), Message.user("second")]
    wire = anthropic_wire(msgs, "<relevant-memories>x</relevant-memories>")
    last = wire[-1]["content"]
    assert last[0]["text"] == "second" and last[0]["cache_control"]["type"] == "ephemeral"
    assert last[1]["text"].startswith("<relevant-memories>") and "cache_control" not in last[1]
    # the stored prefix is byte-identical with or without context
    assert anthropic_wire(msgs)[:-1] == wire[:-1]


def test_openai_context_is_the_last_message():
    msgs = [Message.user("q")]
    wire = openai_wire(msgs, "sys", "", "ctx")
    assert wire[-1] == {"role": "user", "content": "ctx"} and wire[-2] == {"role": "user", "content": "q"}
    assert openai_wire(msgs, "sys") == wire[:-1]
