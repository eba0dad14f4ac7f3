from __future__ import annotations

from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "gloveapp.approvals"
    label = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        # A chat entering a group's queue is told through this app's outbox (e-mail, signed
        # webhook): the conversations app, below this one, calls what is registered.
        from gloveapp.approvals.notifications import queue_handoff_notifications
        from gloveapp.conversations.handoff_texts import on_queue_entry

        on_queue_entry(queue_handoff_notifications)
