"""Configuration: `Settings` (pydantic-settings) loaded from `$TAPEBOT_HOME/config.toml` plus
`TAPEBOT_*` environment variables by `load_settings`.

Importing this package is cheap (no pydantic): the CLI imports `config.errors` on its fast path, and
the heavy names below load on first use.
"""

from __future__ import annotations

from typing import Any

from config.errors import ConfigError, TapebotError

_LAZY = {
    "Settings": "config.settings",
    "ModelConfig": "config.settings",
    "load_settings": "config.loader",
    "resolve_home": "config.loader",
    "mask": "config.loader",
}

__all__ = ["ConfigError", "TapebotError", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'config' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
