"""`MessageMemo`: what is derived from a message is computed once per message object, and the
answers are the function's (references and TaskState's character count use it every round)."""

from __future__ import annotations

import gc

from agent.memo import MessageMemo
from agent.messages import Message, ToolCallPart
from agent.references import _references_of, current_references


def test_computed_once_per_message_object_and_never_for_another():
    calls: list[str] = []

    def size(m: Message) -> int:
        calls.append(m.text)
        return len(m.text)

    memo = MessageMemo(size)
    a, b = Message.user("hello"), Message.user("hello")  # equal, but another object
    assert memo(a) == 5 and memo(a) == 5 and memo(b) == 5
    assert calls == ["hello", "hello"]


def test_a_dropped_message_is_not_kept_and_a_recycled_id_does_not_hit():
    memo = MessageMemo(lambda m: m.text)
    first = Message.user("first")
    assert memo(first) == "first"
    del first
    gc.collect()
    for i in range(200):  # new objects, some at the old address
        m = Message.user(f"other {i}")
        assert memo(m) == f"other {i}"


def test_bounded():
    memo = MessageMemo(lambda m: m.text, max_entries=10)
    kept = [Message.user(str(i)) for i in range(25)]
    assert [memo(m) for m in kept] == [str(i) for i in range(25)]
    assert len(memo._entries) <= 10


def test_references_are_those_of_a_fresh_scan():
    history = [
        Message.user("look at 600519 please"),
        Message.assistant("", [ToolCallPart(id="c1", name="read_file", arguments={"path": "a.txt"})]),
        Message.tool_result("c1", "read_file", '{"refs": {"strategy": "s1", "stock": "000001"}}'),
        Message.user("and this one?", notification=True),
    ]
    first = current_references(history)
    assert first == {"strategy": "s1", "stock": "000001", "file": "a.txt"}
    assert current_references(history) == first  # from memory, the same
    fresh: dict[str, str] = {}
    for m in reversed(history):
        for k, v in _references_of(m).items():
            fresh.setdefault(k, v)
    assert fresh == first
