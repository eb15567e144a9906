"""Importing a vendor SDK without the optional transport tapebot never uses.

The openai and anthropic SDKs try to import aiohttp when they are imported (for an optional
`DefaultAioHttpClient` transport) and carry on without it when it is missing. tapebot talks to the
models through the SDKs' default transport, so in a process that has no other use for aiohttp
(`tapebot chat`, or `tapebot run` without Discord) that import is pure start-up cost: ~0.1 s of
imports plus two TLS contexts aiohttp builds at import (~0.1 s) — about a sixth of a one-shot turn
(issue 21). `import_sdk` hides aiohttp for the duration of the SDK's own import; anything that
needs aiohttp afterwards imports it as usual.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType

#: Optional dependencies of the SDKs that tapebot does not use through them.
UNUSED_OPTIONAL = ("aiohttp",)

_lock = threading.Lock()


def import_sdk(name: str) -> ModuleType:
    """Import the SDK `name`, with `UNUSED_OPTIONAL` hidden unless already imported. Meant for the
    event-loop thread (the first model call): while another thread imports the SDK (the start-up
    warm-up, `App.warm_sdks`), nothing is hidden, so that thread's imports are never disturbed."""
    if name in sys.modules:  # imported, or being imported by another thread (this waits for it)
        return importlib.import_module(name)
    with _lock:
        hidden = [m for m in UNUSED_OPTIONAL if m not in sys.modules]
        for m in hidden:
            sys.modules[m] = None  # type: ignore[assignment]  # "import m" now raises ImportError
        try:
            return importlib.import_module(name)
        except ImportError as exc:
            if exc.name not in hidden:
                raise
        finally:
            for m in hidden:
                if m in sys.modules and sys.modules[m] is None:
                    del sys.modules[m]
    # this SDK version needs it after all: import it the ordinary way
    return importlib.import_module(name)
