"""The approvals' periodic task: reminders, escalations, expiries and notifications (and the
retention of used webhook signatures).

The turn worker's scheduler calls it every GLOVE_APPROVAL_SWEEP_SECONDS (`turns.scheduler`), so
no cron line is needed; it is a Django task, so another scheduler may enqueue it too, and
running it from several places at once is safe (`services.approvals_sweep`).
"""

from __future__ import annotations

from django.tasks import task

from gloveapp.approvals.notifications import notifications_deliver
from gloveapp.approvals.services import approvals_sweep
from inbox.webhooks import used_signatures_prune


@task
def approval_deadlines() -> dict[str, int]:
    """The due reminders, escalations and expiries, then the due notifications."""
    counts = approvals_sweep()
    counts["notified"] = notifications_deliver()
    # The used signatures' retention: past the replay window they cannot match again.
    counts["signatures_pruned"] = used_signatures_prune()
    return counts
