"""The shared fixture that closes asgiref's ORM connection after each test."""

from __future__ import annotations

from tests.helpers import close_async_orm_connection  # noqa: F401  (autouse)
