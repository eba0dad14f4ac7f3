"""The HTMX chat pages."""

from __future__ import annotations

urlpatterns: list = []
