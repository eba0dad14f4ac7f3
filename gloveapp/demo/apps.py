from __future__ import annotations

from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "gloveapp.demo"
    label = "demo"
    verbose_name = "Demo coffee shop"
