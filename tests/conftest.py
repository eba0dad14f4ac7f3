"""Shared fixtures. Services are real: PostgreSQL and Redis on this machine.

Under CI=true a test that needs a missing service fails instead of skipping.
"""

from __future__ import annotations

import os
import socket

import pytest
from django.db import connection

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def service_missing(reason: str) -> None:
    """Fail under CI, skip on a developer machine."""
    if IN_CI:
        pytest.fail(f"required service missing under CI: {reason}")
    pytest.skip(reason)


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def redis_url() -> str:
    if not _port_open("127.0.0.1", 6379):
        service_missing("Redis is not reachable on 127.0.0.1:6379")
    return REDIS_URL


def on_postgres() -> bool:
    return connection.vendor == "postgresql"


@pytest.fixture
def requires_postgres(db) -> None:
    """Tests that only mean something on PostgreSQL run in `make test`'s PostgreSQL pass."""
    if not on_postgres():
        pytest.skip("runs in the PostgreSQL pass (DATABASE_URL=postgres://...)")
