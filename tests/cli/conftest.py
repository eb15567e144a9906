"""Fixtures for the command-line tests: the scripted LLM server the real CLI talks to."""

from tests.fakes.cli_kit import server

__all__ = ["server"]
