"""`python -m tapebot` and `import tapebot`: the command line lives in bot.cli; this package only
gives it the project's name."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from bot.cli import main as cli_main

    return cli_main(argv)


__all__ = ["main"]
