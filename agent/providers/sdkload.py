"""Importing a vendor SDK without what tapebot never uses of it.

Kept because removing it was measured to cost far more than 5% of a real turn: a one-shot
`tapebot chat -m` imports the SDK inside the turn. CPU time of the import in a fresh interpreter
(median of 5, 2-core machine, load ~7, December 2026): openai 540 ms plain, 350 ms with the lazy
types alone, 440 ms with aiohttp hidden alone, 242 ms with both (-300 ms; resident 58 → 39 MB);
anthropic 1,133 → 911 ms (-220 ms). A model round trip is 1-5 s; 5% of the shortest is 50 ms.

- **Every API's types.** Each SDK's `types` packages re-export the models of every endpoint
  (openai: ~470 modules, anthropic: ~2,900); a chat turn needs a few dozen. Those packages load
  each name when it is first read (`config.lazyinit`). anthropic's `resources` packages re-export
  every endpoint's client class the same way and load lazily too.
- **aiohttp.** Both SDKs try to import aiohttp when imported (for an optional transport tapebot
  does not use) and carry on without it when it is missing. It is hidden for the SDK's own import
  only; anything that needs aiohttp afterwards imports it as usual.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType

from config.lazyinit import install_lazy_reexports

#: Optional dependencies of the SDKs that tapebot does not use through them.
UNUSED_OPTIONAL = ("aiohttp",)

#: The packages of each SDK whose re-exporting `__init__`s load what is read, when it is read.
LAZY_PACKAGES: dict[str, tuple[str, ...]] = {"openai": ("types",), "anthropic": ("types", "resources")}

_lock = threading.Lock()


def lazy_reexports(name: str) -> None:
    """From now on, SDK `name`'s re-exporting packages (`LAZY_PACKAGES`) load lazily."""
    for package in LAZY_PACKAGES.get(name, ("types",)):
        install_lazy_reexports(f"{name}.{package}")


def import_sdk(name: str) -> ModuleType:
    """Import the SDK `name` with lazy re-exports and `UNUSED_OPTIONAL` hidden unless already imported.
    Meant for the event-loop thread (the first model call): while another thread imports the SDK
    (the start-up warm-up, `App.warm_sdks`), nothing is hidden, so that thread's imports are never
    disturbed."""
    lazy_reexports(name)
    return import_without(name, UNUSED_OPTIONAL)


def import_without(name: str, unused: tuple[str, ...]) -> ModuleType:
    """Import `name` with the packages `unused` hidden unless they are imported already. When
    `name` is imported (or being imported, by another thread) already, nothing is hidden: that
    other import is never disturbed. If `name` turns out to need one of them after all, it is
    imported the ordinary way."""
    if name in sys.modules:  # imported, or being imported by another thread (this waits for it)
        return importlib.import_module(name)
    with _lock:
        hidden = [m for m in unused if m not in sys.modules]
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
    return importlib.import_module(name)
