from __future__ import annotations

import gc

import pytest


@pytest.fixture(autouse=True)
async def _collect_subprocess_transports():
    """The SDK's stdio transport can leave a closed server's asyncio subprocess transport to the
    garbage collector; collect it while the test's event loop is still open so its __del__ can
    close the pipes instead of warning about a closed loop in a later test."""
    yield
    gc.collect()
