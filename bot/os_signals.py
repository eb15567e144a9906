"""Signal handlers on the event loop, where the platform has them.

Windows event loops (and loops outside the main thread) cannot install signal handlers; there
Ctrl-C keeps raising KeyboardInterrupt as usual, which is the right fallback, so not being able to
install one is not an error.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterable


def on_signals(sigs: Iterable[signal.Signals], callback: Callable[[], object]) -> bool:
    """Call `callback` on any of `sigs`; False where the loop cannot (see above)."""
    loop = asyncio.get_running_loop()
    try:
        for sig in sigs:
            loop.add_signal_handler(sig, callback)
    except (NotImplementedError, RuntimeError):  # no signal handlers on this loop
        return False
    return True


def off_signals(sigs: Iterable[signal.Signals]) -> None:
    loop = asyncio.get_running_loop()
    for sig in sigs:
        try:
            loop.remove_signal_handler(sig)
        except (NotImplementedError, RuntimeError):  # none were installed (see above)
            pass
