"""Provider tests: the real `anthropic` / `openai` SDKs against the scripted LLM server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from agent.providers.anthropic import AnthropicClient
from agent.providers.base import ModelClient, ModelInfo
from agent.providers.openai import OpenAICompatClient
from tests.fakes.llm_fixtures import llm_server, llm_server_thread  # noqa: F401
from tests.fakes.llm_server import ScriptedLLMServer


@pytest.fixture
async def make_client(llm_server: ScriptedLLMServer) -> AsyncIterator[Callable[..., ModelClient]]:  # noqa: F811
    """make_client("anthropic" | "openai", model=..., idle_timeout=...) bound to the server."""
    made: list[ModelClient] = []

    def make(vendor: str, model: str | None = None, *, idle_timeout: float = 5.0, **kw) -> ModelClient:
        if vendor == "anthropic":
            info = ModelInfo(
                id=kw.pop("id", model or "claude"), model=model or "claude-test", provider="anthropic"
            )
            client: ModelClient = AnthropicClient(
                info, "test-key", llm_server.url, idle_timeout=idle_timeout, **kw
            )
        else:
            info = ModelInfo(id=kw.pop("id", model or "gpt"), model=model or "gpt-test", provider="openai")
            client = OpenAICompatClient(
                info, "test-key", llm_server.openai_base_url, idle_timeout=idle_timeout, **kw
            )
        made.append(client)
        return client

    yield make
    for client in made:
        await client.aclose()
