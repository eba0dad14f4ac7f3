from __future__ import annotations

from django.apps import AppConfig


class TurnsConfig(AppConfig):
    """Chat turns (the Turn queue, its worker and admin) and the run_agent command."""

    name = "gloveapp.turns"
    label = "turns"
    verbose_name = "Chat turns"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from gloveapp.lib import turn_waking
        from gloveapp.turns import checks  # noqa: F401  (registers the system checks)
        from gloveapp.turns.queue.tasks import wake_turn

        # An answer stored by any app (an approval's decision, a prompt's answer, a Stop)
        # puts a turn parked on it back on the queue, in the answer's transaction.
        turn_waking.set_turn_waker(wake_turn)

        # Traces, when OTEL_EXPORTER_OTLP_ENDPOINT asks for them (docs/howto/observe.md).
        from gloveapp.lib.telemetry import setup_tracing

        setup_tracing()
