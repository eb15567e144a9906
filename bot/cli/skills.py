"""`tapebot skills [list|check]` — the built-in and user skills, and problems in skill files."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def main(argv: Sequence[str], ctx: Any) -> int:
    from agent.skills import skills_cli

    return skills_cli(list(argv), ctx.settings(require_model=False).skills_dir, ctx.stdout)
