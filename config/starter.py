"""`tapebot init`: write the commented starter config. Kept free of pydantic so it stays fast."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from config.errors import ConfigError


def starter_text() -> str:
    return resources.files("config").joinpath("starter.toml").read_text(encoding="utf-8")


def write_starter(home: Path, *, force: bool = False) -> Path:
    """Write `<home>/config.toml`; refuse to overwrite an existing file unless `force`."""
    path = home / "config.toml"
    if path.exists() and not force:
        raise ConfigError("already exists", file=str(path), fix="pass --force to overwrite it")
    home.mkdir(mode=0o700, parents=True, exist_ok=True)  # holds secrets and chats: owner only
    tmp = path.with_suffix(".toml.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # it may get an api_key
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(starter_text())
    tmp.replace(path)
    return path
