"""Importing a vendor SDK without the optional transport tapebot never uses.

The openai and anthropic SDKs try to import aiohttp when they are imported (for an optional
`DefaultAioHttpClient` transport) and carry on without it when it is missing. tapebot talks to the
models through the SDKs' default transport, so in a process with no other use for aiohttp
(`tapebot chat`, or `tapebot run` without Discord) that import is pure start-up cost: ~0.1 s of
imports plus two TLS contexts aiohttp builds at import (~0.1 s) — about a sixth of a one-shot turn
(issue 21). See `config.imports.import_without`.
"""

from __future__ import annotations

from types import ModuleType

from config.imports import import_without

#: Optional dependencies of the SDKs that tapebot does not use through them.
UNUSED_OPTIONAL = ("aiohttp",)


def import_sdk(name: str) -> ModuleType:
    """Import the SDK `name` with `UNUSED_OPTIONAL` hidden unless already imported. Meant for the
    event-loop thread (the first model call): while another thread imports the SDK (the start-up
    warm-up, `App.warm_sdks`), nothing is hidden, so that thread's imports are never disturbed."""
    return import_without(name, UNUSED_OPTIONAL)
