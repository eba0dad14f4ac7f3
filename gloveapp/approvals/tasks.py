"""The approvals' periodic task: reminders, escalations, expiries and notifications.

The turn worker's scheduler calls it every GLOVE_APPROVAL_SWEEP_SECONDS (`turns.worker`), so
no cron line is needed; it is a Django task, so another scheduler may enqueue it too, and
running it from several places at once is safe (`services.approvals_sweep`).
"""

from __future__ import annotations

from django.tasks import task

from gloveapp.approvals.notifications import notifications_deliver
from gloveapp.approvals.services import approvals_sweep


@task
def approval_deadlines() -> dict[str, int]:
    """The due reminders, escalations and expiries, then the due notifications."""
    counts = approvals_sweep()
    counts["notified"] = notifications_deliver()
    return counts
