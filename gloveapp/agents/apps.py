from __future__ import annotations

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "gloveapp.agents"
    label = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        from gloveapp.agents import checks  # noqa: F401  (registers the system checks)
        from gloveapp.agents.config import register_demo_model

        register_demo_model()
