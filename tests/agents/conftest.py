"""Agents with extensions (MCP servers, subagents, skills, hooks) run by a turn worker in
this process; the helpers that drive a chat are the demo tests' own."""

from __future__ import annotations

import pytest

from tests.demo.conftest import last_reply, next_slot, say

__all__ = ["last_reply", "next_slot", "say"]


@pytest.fixture(autouse=True)
def _connections(close_worker_connections):
    """Every test here drives a turn worker (the `worker` fixture) in its loop."""


@pytest.fixture
def worker(turn_worker):
    return turn_worker
