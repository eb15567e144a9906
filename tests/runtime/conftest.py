from __future__ import annotations

from typing import Any

import pytest

from agent.inmemory import InMemoryStore
from agent.runtime import AgentRuntime
from agent.tools.registry import Toolset
from tests.fakes.runtime_kit import Script


@pytest.fixture
def store() -> InMemoryStore:
    return InMemoryStore()


@pytest.fixture
def make_runtime(store, tmp_path):
    def make(script: Script, tools: Toolset, **kw: Any) -> AgentRuntime:
        return AgentRuntime(
            model_for=lambda _id: script,
            tools=tools,
            store=store,
            results_dir=tmp_path / "results",
            workspace=tmp_path,
            **kw,
        )

    return make
