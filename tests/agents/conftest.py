"""Agents with extensions (MCP servers, subagents, skills, hooks) run by a turn worker in
this process; the helpers that drive a chat are the demo tests' own."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from tests.demo.conftest import last_reply, next_slot, say

__all__ = ["last_reply", "next_slot", "say"]


@pytest.fixture(autouse=True)
async def close_worker_connections():
    """The entry points' database work happens in asgiref's worker thread; close its
    connection after each test so PostgreSQL can drop the test database at the end."""
    yield
    await sync_to_async(connections.close_all)()


@pytest.fixture
def worker(turn_worker):
    return turn_worker
