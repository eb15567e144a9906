"""Importing a vendor SDK without what tapebot never uses of it.

- **aiohttp.** The openai and anthropic SDKs try to import aiohttp when they are imported (for an
  optional `DefaultAioHttpClient` transport) and carry on without it when it is missing. tapebot
  talks to the models through the SDKs' default transport, so in a process with no other use for
  aiohttp (`tapebot chat`, or `tapebot run` without Discord) that import is pure start-up cost:
  ~0.1 s of imports plus two TLS contexts aiohttp builds at import (~0.1 s). See
  `config.imports.import_without`.
- **Every API's types.** Each SDK's `types` packages re-export the models of every endpoint
  (openai: ~470 modules, anthropic: ~2,900), and importing the SDK imports them all; a chat turn
  needs a few dozen. Those packages load their names on first use (`config.lazyinit`): ~0.3 s of
  a one-shot turn with openai, ~0.4 s with anthropic.
- **Every API's resources (anthropic).** anthropic's `resources` packages re-export every
  endpoint's client class the same way, and its Vertex, Bedrock and tool-runner helpers, which
  its `__init__` imports, import the beta resources: every beta endpoint and its types, for the
  one class each needs. They load on first use too. openai's `resources` packages do more than
  re-export, so they load the ordinary way.
"""

from __future__ import annotations

from types import ModuleType

from config.imports import import_without
from config.lazyinit import install_lazy_reexports

#: Optional dependencies of the SDKs that tapebot does not use through them.
UNUSED_OPTIONAL = ("aiohttp",)


#: The packages of each SDK whose re-exporting `__init__`s load what is read, when it is read.
LAZY_PACKAGES: dict[str, tuple[str, ...]] = {"openai": ("types",), "anthropic": ("types", "resources")}


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
