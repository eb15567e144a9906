"""What a `tapebot` subcommand gets from the command line: where home is, the environment (with
the .env files read), where to print, the clock — and how to load the settings from them. Its own
module, so the subcommands' modules can name it without importing the command line itself."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from config.settings import Settings


@dataclass
class CliContext:
    """What a subcommand needs from the command line: where home is, and how to load settings."""

    home: Path | None = None
    debug: bool = False
    log_file: Path | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))  # injected in tests
    # Every command sees the same configuration: the .env files are merged in once, the first time
    # settings or home are resolved, whichever command asks.
    env_files: list[Path] | None = None

    def settings(
        self, *, require_model: bool = True, require_platform: bool = False, model: str | None = None
    ) -> Settings:
        from config.loader import load_settings

        self.read_env_files()
        settings = load_settings(
            self.home,
            self.environ,
            require_model=require_model,
            require_platform=require_platform,
            model=model,
        )
        if self.log_file is not None:
            settings.log.file = self.log_file.expanduser().absolute()
        return settings

    def resolve_home(self) -> Path:
        """The state folder, with the .env files read (./.env may name TAPEBOT_HOME)."""
        from config.loader import resolve_home

        self.read_env_files()
        return resolve_home(self.home, self.environ)

    def read_env_files(self) -> list[Path]:
        """Add the variables of `./.env` and `$TAPEBOT_HOME/.env` to this context's environment
        (the real environment wins, then ./.env). Returns the files read; idempotent."""
        if self.env_files is not None:
            return self.env_files
        from dotenv import dotenv_values

        from config.loader import resolve_home

        merged = dict(self.environ)
        read: list[Path] = []

        def _read(path: Path) -> None:
            if path.is_file() and path not in read:
                read.append(path)
                for k, v in dotenv_values(path).items():
                    if v is not None:
                        merged.setdefault(k, v)

        _read(Path.cwd() / ".env")
        _read(resolve_home(self.home, merged) / ".env")  # ./.env may name TAPEBOT_HOME
        self.environ = merged
        self.env_files = read
        return read
