"""Helpers shared by the provider tests (a uniquely named module: conftest names collide)."""

from __future__ import annotations

from agent.messages import Message
from agent.providers.base import Chunk, ModelClient, ModelRequest, TextChunk, ToolSchema

TOOLS = [
    ToolSchema("get_quote", "Latest quote", {"type": "object", "properties": {"code": {"type": "string"}}}),
    ToolSchema("get_news", "News", {"type": "object", "properties": {"q": {"type": "string"}}}),
]


def req(*messages: Message, **kw) -> ModelRequest:
    return ModelRequest(messages=list(messages) or [Message.user("hi")], **kw)


async def collect(client: ModelClient, request: ModelRequest, into: list[Chunk] | None = None) -> list[Chunk]:
    """All chunks of one stream; with `into`, chunks are appended as they arrive (so a test can
    inspect what was delivered before an exception)."""
    chunks = [] if into is None else into
    async for chunk in client.stream(request):
        chunks.append(chunk)
    return chunks


def text_of(chunks: list[Chunk]) -> str:
    return "".join(c.text for c in chunks if isinstance(c, TextChunk))
