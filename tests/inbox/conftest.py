from __future__ import annotations

import pytest
from asgiref.sync import SyncToAsync
from django.db import connections


@pytest.fixture(autouse=True)
def _close_async_orm_connection():
    """Async code runs the ORM in asgiref's single executor thread, on that thread's own
    connection; close it after each test so the test database can be flushed and dropped."""
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()
