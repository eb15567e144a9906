"""Fixtures for the configuration tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def home(tmp_path, monkeypatch):
    """TAPEBOT_HOME in a fresh folder (not created yet), with no model or chat token set."""
    home = tmp_path / "home"
    monkeypatch.setenv("TAPEBOT_HOME", str(home))
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    return home
