from __future__ import annotations

from django.apps import AppConfig


class LiveConfig(AppConfig):
    name = "gloveapp.live"
    label = "live"
    verbose_name = "Live events"

    def ready(self) -> None:
        from gloveapp.live.signout import connect_signals

        connect_signals()
