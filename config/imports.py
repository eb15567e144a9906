"""Importing a library without an optional extra that tapebot never uses through it.

Some dependencies import optional packages eagerly when those happen to be installed: the openai
and anthropic SDKs import aiohttp (for an alternative transport tapebot does not use), and httpx
imports its command-line tool's click, pygments and rich; python-telegram-bot imports
cryptography (for Telegram Passport) and tornado (for its own webhook server). In a process with no other use for them
that is pure start-up time and resident memory (~0.2 s and two TLS contexts for aiohttp; ~5.5 MB
for httpx's CLI). `import_without` hides the unused package for the duration of the
library's own import, which then carries on as if it were not installed; anything that needs the
package afterwards imports it as usual.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType

_lock = threading.Lock()


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


def import_httpx() -> ModuleType:
    """httpx without its command-line tool (click, pygments, rich)."""
    return import_without("httpx", HTTPX_UNUSED)


def import_telegram() -> ModuleType:
    """python-telegram-bot's `telegram.ext` without what tapebot does not use through it: httpx's
    CLI, cryptography (Telegram Passport decryption, ~7.5 MB) and tornado (the library's own
    webhook server; tapebot serves webhooks with aiohttp, adapters/telegram.py; ~2.7 MB)."""
    return import_without("telegram.ext", (*HTTPX_UNUSED, "cryptography", "tornado"))


#: httpx imports its command-line tool when click is installed; hiding click skips the whole tool.
HTTPX_UNUSED = ("click",)
