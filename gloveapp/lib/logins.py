"""django-axes' records of logins, kept bounded: how long they are kept (the turn worker's
retention applies it; the admin's lists of them are `gloveapp.api.admin`'s).

Every login and logout writes an `AccessLog` row, every failure an `AccessAttempt` (one per
username, address and browser, counting) and, when enabled, an `AccessFailureLog` row: all
of them grow with use, and axes prunes none of them by itself.
"""

from __future__ import annotations

from datetime import timedelta
from numbers import Real

from django.apps import apps
from django.conf import settings
from django.utils import timezone

from gloveapp.lib.db.batches import delete_in_batches


def login_records_prune(*, older_than: timedelta) -> int:
    """Forget the login records older than `older_than`; how many went. An attempt that may
    still count toward a lockout (younger than AXES_COOLOFF_TIME) stays whatever the
    retention, and with a cool-off axes computes per request, none goes. Without axes
    installed, nothing to do."""
    if not apps.is_installed("axes"):
        return 0
    from axes.models import AccessAttempt, AccessFailureLog, AccessLog

    now = timezone.now()
    cut = now - older_than
    forgotten = delete_in_batches(AccessLog.objects.filter(attempt_time__lt=cut))
    forgotten += delete_in_batches(AccessFailureLog.objects.filter(attempt_time__lt=cut))
    cooloff = getattr(settings, "AXES_COOLOFF_TIME", None)
    if isinstance(cooloff, Real) and not isinstance(cooloff, bool):
        cooloff = timedelta(hours=float(cooloff))
    if isinstance(cooloff, timedelta):
        attempts_cut = min(cut, now - cooloff)
        forgotten += delete_in_batches(AccessAttempt.objects.filter(attempt_time__lt=attempts_cut))
    return forgotten
