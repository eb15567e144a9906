"""pytest fixtures for the scripted LLM server. Use them from a conftest.py:

from tests.fakes.llm_fixtures import llm_server, llm_server_thread  # noqa: F401
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.fakes.llm_server import ScriptedLLMServer


@pytest.fixture
async def llm_server() -> AsyncIterator[ScriptedLLMServer]:
    """A server on the test's event loop (for in-process SDK clients)."""
    async with ScriptedLLMServer() as server:
        yield server


@pytest.fixture
def llm_server_thread() -> Iterator[ScriptedLLMServer]:
    """A server on its own thread and loop (for CLI tests that run their own loop or a subprocess)."""
    server = ScriptedLLMServer()
    server.start_in_thread()
    try:
        yield server
    finally:
        server.stop()
