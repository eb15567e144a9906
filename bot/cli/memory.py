"""`tapebot memory …` — list, search, forget and trace long-term memories from the terminal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def main(argv: Sequence[str], ctx: Any) -> int:
    from memory.cli import memory_cli

    return memory_cli(list(argv), ctx.settings(require_model=False), out=ctx.stdout)
