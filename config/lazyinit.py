"""Packages whose `__init__` only re-exports, loaded on first use of a name instead of all at once.

The openai and anthropic SDKs generate `types/__init__.py` files that are nothing but
`from .module import Name as Name` lines, hundreds of them, and importing the SDK runs them all:
every pydantic model of every API, when a chat turn needs a few dozen. `install_lazy_reexports
("openai.types")` makes each such package a module whose names are imported when first read. What
any module imports directly is imported as before, so every model a turn touches is built exactly
as the SDK would build it; only the ones no code reaches are skipped. Kept for its measured cost:
without it the openai SDK's import takes ~190 ms more CPU (350 → 540 ms, median of 5 fresh
interpreters, December 2026), paid inside every one-shot turn, well over 5% of a 1 s model round
trip (agent/providers/sdkload.py has the figures). Python has no lazy `from x import y` of its own
before 3.15, and `importlib.util.LazyLoader` defers whole modules, not names.

A package is made lazy only when its `__init__` has nothing but a docstring, `from __future__`
and `from .x import a as b` statements and perhaps an `__all__` list of string literals naming
only what those bind, and no re-exported name is also a submodule's name (whose attribute the
import system would overwrite); anything else loads the ordinary way. `dir()`,
`__all__` (so `from pkg import *`) and reading a submodule as an attribute (`pkg.chat`) behave as
with the eager package; tests/perf/test_perf_lazy_sdk_types.py compares both, name by name.
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

_lock = threading.Lock()


@dataclass(frozen=True)
class Reexports:
    """What a re-exporting `__init__` binds: each name's submodule (relative, e.g. "chat.completion")
    and, when it was renamed (`from .x import a as b`), its name there."""

    where: dict[str, str]
    renamed: dict[str, str]
    all: tuple[str, ...] | None = None  # the `__all__` the `__init__` sets, if it sets one

    @property
    def submodules(self) -> frozenset[str]:
        """The submodules the eager `__init__` imports, so `pkg.sub` works without importing it."""
        return frozenset(m.split(".")[0] for m in self.where.values())


class LazyPackage(ModuleType):
    """A package whose re-exported names are imported from their submodules when first read."""

    def __getattr__(self, attr: str) -> Any:  # only called for names not bound yet
        names: Reexports | None = self.__dict__.get("__reexports__")
        if names is None or attr.startswith("__"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        if attr in names.where:
            submodule = importlib.import_module(f"{self.__name__}.{names.where[attr]}")
            value = getattr(submodule, names.renamed.get(attr, attr))
        elif attr in names.submodules:
            value = importlib.import_module(f"{self.__name__}.{attr}")
        else:
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        setattr(self, attr, value)
        return value

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *self.__dict__["__reexports__"].where})


def reexports(source: bytes) -> Reexports | None:
    """What an `__init__` that only re-exports binds; None for any other kind of `__init__`."""
    where: dict[str, str] = {}
    renamed: dict[str, str] = {}
    explicit: tuple[str, ...] | None = None
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if (listed := _dunder_all(node)) is not None:
            explicit = listed
            continue
        if not (isinstance(node, ast.ImportFrom) and node.level == 1 and node.module):
            return None
        for alias in node.names:
            if alias.name == "*":
                return None
            bound = alias.asname or alias.name
            where[bound] = node.module
            if alias.name != bound:
                renamed[bound] = alias.name
    found = Reexports(where, renamed, explicit)
    if set(where) & found.submodules:
        return None  # a name that is also a submodule's: leave the ordinary import its order
    if explicit is not None and not set(explicit) <= set(where) | found.submodules:
        return None  # `__all__` names something the `__init__` does not bind
    return found


def _dunder_all(node: ast.stmt) -> tuple[str, ...] | None:
    """The names of `__all__ = [...]` (or a tuple) of string literals; None for any other statement."""
    if not (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id == "__all__"
        and isinstance(node.value, (ast.List, ast.Tuple))
    ):
        return None
    names = [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return tuple(names) if len(names) == len(node.value.elts) else None


class _Loader(importlib.abc.Loader):
    def __init__(self, names: Reexports) -> None:
        self.names = names

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = LazyPackage(spec.name)
        module.__dict__["__reexports__"] = self.names
        # `from pkg import *` binds what it bound from the eager package: its `__all__`, or else
        # every name and the submodules its imports bound
        names = self.names
        module.__dict__["__all__"] = (
            list(names.all) if names.all is not None else [*names.where, *sorted(names.submodules)]
        )
        return module

    def exec_module(self, module: ModuleType) -> None:
        return None  # nothing runs: names are imported as they are read


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, prefixes: Sequence[str]) -> None:
        self.prefixes = tuple(prefixes)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not any(fullname == p or fullname.startswith(p + ".") for p in self.prefixes):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.submodule_search_locations or not spec.origin:
            return spec  # a plain module (or not found): the ordinary way
        try:
            with open(spec.origin, "rb") as f:
                found = reexports(f.read())
        except (OSError, SyntaxError, ValueError):
            found = None
        if found is None:
            return spec
        lazy = importlib.machinery.ModuleSpec(fullname, _Loader(found), origin=spec.origin, is_package=True)
        lazy.submodule_search_locations = spec.submodule_search_locations
        lazy.has_location = True
        return lazy


def install_lazy_reexports(prefix: str) -> None:
    """Load the re-exporting packages at `prefix` and below lazily from now on (idempotent). A
    package imported already stays as it is."""
    with _lock:
        for finder in sys.meta_path:
            if isinstance(finder, _Finder) and prefix in finder.prefixes:
                return
        sys.meta_path.insert(0, _Finder([prefix]))
