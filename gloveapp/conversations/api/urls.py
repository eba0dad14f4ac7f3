"""The REST remote store (DRF), mounted at /api/."""

from __future__ import annotations

urlpatterns: list = []
