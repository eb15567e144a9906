from __future__ import annotations

import base64
import gc

import pytest

from bot.mcp_server import served_toolset
from tests.mcp.mcp_toy_server import PNG
from tests.mcp.mcp_toy_tapebot import make_toolset


@pytest.fixture(autouse=True)
async def _collect_subprocess_transports():
    """The SDK's stdio transport can leave a closed server's asyncio subprocess transport to the
    garbage collector; collect it while the test's event loop is still open so its __del__ can
    close the pipes instead of warning about a closed loop in a later test."""
    yield
    gc.collect()


@pytest.fixture
def png(tmp_path):
    """A 1x1 PNG file, the chart the toy tools return."""
    path = tmp_path / "chart.png"
    path.write_bytes(base64.b64decode(PNG))
    return path


@pytest.fixture
def toolset(png):
    """The toy tapebot's tools as the MCP server serves them."""
    return served_toolset(make_toolset(png))
