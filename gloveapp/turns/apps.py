from __future__ import annotations

from django.apps import AppConfig


class TurnsConfig(AppConfig):
    """The turn runner edge; an app only so that it can ship the run_agent command."""

    name = "gloveapp.turns"
    label = "turns"
    verbose_name = "Turns"
