"""Cancelled means cancelled: a request the user cancelled (/cancel, Ctrl-C) or that failed (the
model provider did not answer) stays in the history marked as not done, so the next turn's model
reads "do not act on it" right after it — "buy 1000" is never carried out by a later message."""

from __future__ import annotations

import asyncio

from agent import events as ev
from agent.approval import Requester
from agent.errors import FatalModelError
from agent.providers.base import ModelRequest, TextChunk
from agent.runtime import CANCELLED_NOTE, FAILED_NOTE, TurnRequest
from agent.tools.registry import Toolset
from tests.fakes.runtime_kit import Script, text


def _req(t: str, cancel: asyncio.Event | None = None) -> TurnRequest:
    return TurnRequest(session_id="s1", text=t, who=Requester("u1", "tg:1", ("u1",)), cancel=cancel)


def _after(request: ModelRequest, user_text: str) -> str:
    """The text of the message that follows the user's `user_text` in what the model was sent."""
    texts = [m.text for m in request.messages]
    return texts[texts.index(user_text) + 1]


async def test_a_cancelled_request_is_marked_in_what_the_next_turn_sees(make_runtime, store):
    class StallsOnce(Script):
        stalled = False

        async def stream(self, request):
            if not StallsOnce.stalled:
                StallsOnce.stalled = True
                yield TextChunk("Placing the order for ")
                await asyncio.sleep(30)
            async for chunk in super().stream(request):
                yield chunk

    script = StallsOnce([[text("The weather is fine.")]])
    rt = make_runtime(script, Toolset("none"))
    cancel = asyncio.Event()
    events = []
    async for e in rt.run(_req("buy 1000 600519", cancel)):
        events.append(e)
        if isinstance(e, ev.TextDelta):
            cancel.set()
    assert events[-1].status == "cancelled"
    async for _ in rt.run(_req("how is the weather?")):
        pass
    follow_up = script.requests[-1]
    assert _after(follow_up, "buy 1000 600519") == CANCELLED_NOTE
    assert "Do not act on that request" in CANCELLED_NOTE
    assert follow_up.messages[-1].text == "how is the weather?"


async def test_a_failed_request_is_marked_too(make_runtime, store):
    class FailsOnce(Script):
        failed = False

        async def stream(self, request):
            if not FailsOnce.failed:
                FailsOnce.failed = True
                raise FatalModelError("503 upstream unavailable")
            async for chunk in super().stream(request):
                yield chunk

    script = FailsOnce([[text("ok")]])
    rt = make_runtime(script, Toolset("none"))
    statuses = [e.status async for e in rt.run(_req("sell everything")) if isinstance(e, ev.Done)]
    assert statuses == ["failed"]
    async for _ in rt.run(_req("what did I hold?")):
        pass
    assert _after(script.requests[-1], "sell everything") == FAILED_NOTE
