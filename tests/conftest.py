"""Shared test fixtures. Area-specific fixtures live in each tests/<area>/conftest.py."""

from __future__ import annotations

import os

import pytest

# Tests never touch the internet and never read the developer's real state.
os.environ.setdefault("TAPEBOT_HOME", "/nonexistent-tapebot-home-for-tests")
for _var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
    os.environ.pop(_var, None)


@pytest.fixture
def tapebot_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("TAPEBOT_HOME", str(home))
    return home
