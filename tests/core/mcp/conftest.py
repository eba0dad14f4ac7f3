from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from gloveapp.core.mcp import TOOL_LISTS
from tests.conftest import service_missing
from tests.mcp_servers import EverythingServer, everything_server


@pytest.fixture
def everything() -> Iterator[EverythingServer]:
    if shutil.which("node") is None or shutil.which("npm") is None:
        service_missing("node and npm are needed for @modelcontextprotocol/server-everything")
    with everything_server() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_tool_lists() -> Iterator[None]:
    TOOL_LISTS.invalidate()
    yield
    TOOL_LISTS.invalidate()
