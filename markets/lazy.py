"""Names imported on first use, so that registering the market tools (their names and schemas, at
every start, also for a one-shot `tapebot chat -m hi`) does not import numpy, the Wyckoff engine or
the bundled dataset: those load when a market tool first runs.

    if TYPE_CHECKING:                      # type checkers see the real imports
        from markets.screen import screen
    else:
        screen = lazy("markets.screen", "screen")

A `lazy` stands in for a module or a callable/class used by attribute or call. Not for exception
classes in `except` clauses, `isinstance` checks or annotations a tool's schema evaluates: import
those directly (they live in light modules such as markets.errors and markets.symbols).
"""

from __future__ import annotations

import importlib
from typing import Any


class lazy:
    __slots__ = ("_module", "_name", "_target")

    def __init__(self, module: str, name: str | None = None):
        self._module, self._name = module, name
        self._target: Any = None

    def _resolve(self) -> Any:
        if self._target is None:
            mod = importlib.import_module(self._module)
            self._target = mod if self._name is None else getattr(mod, self._name)
        return self._target

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._resolve(), attr)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._resolve()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"lazy({self._module!r}{f', {self._name!r}' if self._name else ''})"
