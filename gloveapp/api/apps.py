from __future__ import annotations

from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The REST edge (DRF); an app only so that `create_api_token` is a management command."""

    name = "gloveapp.api"
    label = "api"
    verbose_name = "REST API"
