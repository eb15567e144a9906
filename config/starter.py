"""`tapebot init`: write the commented starter config. Kept free of pydantic so it stays fast."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from config.errors import ConfigError
from config.filemodes import make_private_dir, write_private_text


def starter_text() -> str:
    return resources.files("config").joinpath("starter.toml").read_text(encoding="utf-8")


def write_starter(home: Path, *, force: bool = False) -> Path:
    """Write `<home>/config.toml`; refuse to overwrite an existing file unless `force`."""
    path = home / "config.toml"
    if path.exists() and not force:
        raise ConfigError("already exists", file=str(path), fix="pass --force to overwrite it")
    # 0700 home, 0600 config whatever the umask: it will hold API keys.
    make_private_dir(home)
    write_private_text(path, starter_text())
    return path
