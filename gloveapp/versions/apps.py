from __future__ import annotations

from django.apps import AppConfig


class VersionsConfig(AppConfig):
    """Agent versions (what staff may change of an agent, immutable, behind a draft and a
    published pointer) and replays of recorded conversations against a version."""

    name = "gloveapp.versions"
    label = "versions"
    verbose_name = "Agent versions and replays"
    default_auto_field = "django.db.models.BigAutoField"
