"""Per-turn state travels with the call: one runtime serves every chat, so
nothing about a turn may live on the shared runtime or executor. Two chats run mutating tools at
once, the process "crashes" mid-way, and after the restart each chat's model is told the truth
about its own calls."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from hypothesis import given
from hypothesis import strategies as st

from agent.approval import Requester
from agent.inmemory import InMemoryStore
from agent.providers.base import Chunk, FinishChunk, ModelInfo, ModelRequest, TextChunk, ToolCallChunk
from agent.runtime import AgentRuntime, TurnRequest
from agent.tools.registry import Toolset
from tests.fakes.runtime_kit import call

tools = Toolset("scope")
started: dict[str, asyncio.Event] = {}
release: dict[str, asyncio.Event] = {}


@tools.tool(side_effect="mutating")
async def place(tag: str) -> str:
    """A mutating tool (no approval needed) that waits until the test lets it finish."""
    started[tag].set()
    await release[tag].wait()
    return f"placed {tag}"


class ByChat:
    """A model whose rounds are scripted per chat (the first user message names the chat)."""

    def __init__(self, rounds: dict[str, list[list[Chunk]]]):
        self.rounds = rounds
        self.info = ModelInfo(id="m", model="m", provider="scripted")

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        chat = request.messages[0].text
        chunks = self.rounds[chat].pop(0) if self.rounds[chat] else [TextChunk("ok")]
        for c in chunks:
            yield c
        yield FinishChunk("tool_calls" if any(isinstance(c, ToolCallChunk) for c in chunks) else "stop")

    async def aclose(self) -> None:
        return None


def _runtime(store: InMemoryStore, model: ByChat, tmp_path) -> AgentRuntime:
    return AgentRuntime(model_for=lambda _id: model, tools=tools, store=store, workspace=tmp_path)


def _req(chat: str) -> TurnRequest:
    return TurnRequest(session_id=chat, text=chat, who=Requester("u-" + chat, "tg:" + chat, ("u-" + chat,)))


async def _drain(agen) -> None:
    async for _ in agen:
        pass


def _result_of(store: InMemoryStore, session: str, call_id: str) -> str:
    for m in store.messages[session]:
        for r in m.tool_results:
            if r.call_id == call_id:
                return r.content
    raise AssertionError(f"no result for {call_id} in {session}")


async def test_two_chats_crash_mid_call_and_each_model_hears_the_truth(tmp_path):
    """Chat A runs a1 (finishes) then a2; chat B starts b1 while a1 runs. With the
    per-turn `mark` on the shared executor, A's a2 was recorded on B's turn, and after the crash
    A's model was told a2 was "not run" although it was running."""
    for tag in ("a1", "a2", "b1"):
        started[tag], release[tag] = asyncio.Event(), asyncio.Event()
    a1, a2, b1 = call("place", {"tag": "a1"}), call("place", {"tag": "a2"}), call("place", {"tag": "b1"})
    model = ByChat({"A": [[a1, a2]], "B": [[b1]]})
    store = InMemoryStore()
    rt = _runtime(store, model, tmp_path)
    turn_a = asyncio.create_task(_drain(rt.run(_req("A"))))
    await started["a1"].wait()
    turn_b = asyncio.create_task(_drain(rt.run(_req("B"))))
    await started["b1"].wait()
    release["a1"].set()
    await started["a2"].wait()  # a2 (mutating) is running in chat A; b1 is running in chat B

    # the crash: the process dies with both turns mid-call (the tasks are simply abandoned — no
    # cancellation handler runs in a real crash); a new runtime starts over the same storage
    snapshot = InMemoryStore()
    snapshot.messages = {k: [m.model_copy(deep=True) for m in v] for k, v in store.messages.items()}
    snapshot.turns = {k: t.model_copy(deep=True) for k, t in store.turns.items()}
    turn_a.cancel(), turn_b.cancel()
    await asyncio.gather(turn_a, turn_b, return_exceptions=True)

    restarted = _runtime(snapshot, ByChat({"A": [], "B": []}), tmp_path)
    for chat in ("A", "B"):
        turn = await snapshot.open_turn(chat)
        assert turn is not None
        await restarted.close_turn(turn.id)

    assert "placed a1" in _result_of(snapshot, "A", a1.call.id)
    for session, c in (("A", a2), ("B", b1)):
        said = _result_of(snapshot, session, c.call.id)
        assert "may or may not have completed" in said, (session, said)
        assert "Not run" not in said
    # and no chat's turn record holds another chat's call
    for t in snapshot.turns.values():
        own = {"A": {a1.call.id, a2.call.id}, "B": {b1.call.id}}[t.session_id]
        assert set(t.calls) <= own, (t.session_id, t.calls)


@given(
    st.lists(st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f"]), max_size=3), max_size=12), st.data()
)
def test_the_turns_calls_read_from_the_end_are_the_turns_calls_in_order(rounds, data):
    """`_turn_calls` scans the history from its end; it finds what a scan of it all finds."""
    from agent.messages import Message, ToolCallPart
    from agent.ports import TurnRecord
    from agent.runtime import AgentRuntime

    messages = [Message.user("hello")]
    ids = []
    for r, names in enumerate(rounds):
        calls = [ToolCallPart(id=f"r{r}-{i}-{n}", name=n, arguments={}) for i, n in enumerate(names)]
        ids.extend(c.id for c in calls)
        messages.append(Message.assistant("", calls))
        messages.append(Message.user(f"more {r}"))
    mine = data.draw(st.sets(st.sampled_from(ids))) if ids else set()
    turn = TurnRecord(id="t", session_id="s", calls={i: "pending" for i in mine})
    everything = [c for m in messages if m.role == "assistant" for c in m.tool_calls if c.id in turn.calls]
    assert AgentRuntime._turn_calls(messages, turn) == everything
