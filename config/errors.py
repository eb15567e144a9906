"""Config errors. Defined here, not in `agent`, because `config` sits below `agent` in the
dependency order; `agent.errors` re-exports both names so the exception tree stays one tree."""

from __future__ import annotations


class TapebotError(Exception):
    """Base of every error tapebot raises on purpose."""


class ConfigError(TapebotError):
    """A broken or missing configuration. `str(err)` is one line naming the file, the key and the fix,
    e.g. ``/home/u/.tapebot/config.toml: key 'agent.model': names no model — declared: main``."""

    def __init__(
        self, message: str, *, file: str | None = None, key: str | None = None, fix: str | None = None
    ):
        self.message, self.file, self.key, self.fix = message, file, key, fix
        parts = []
        if file:
            parts.append(str(file))
        if key:
            parts.append(f"key '{key}'")
        head = ": ".join(parts)
        text = f"{head}: {message}" if head else message
        if fix:
            text += f" — {fix}"
        super().__init__(" ".join(text.split()))  # always one line
