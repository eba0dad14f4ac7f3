"""Log hygiene: a refused request is one line, an outage is one line, not one per request.

`RefusalFilter` sits on the console handler (settings.LOGGING):

- a request refused for its own sake (a body past DATA_UPLOAD_MAX_MEMORY_SIZE, any 4xx
  Django logs with the exception that made it) is logged as one line, without the traceback;
  the refusal is the expected answer, not an error of ours;
- a 503 for a transaction conflict (a deadlock) is logged each time, as one line naming it;
- a 503 for a database that is away (`api.common.errors.server_error`) is logged once per outage:
  the first request of a run of them says so in one line; the next ones are dropped until
  `OUTAGE_GAP_SECONDS` pass without one (then a later 503 starts a new outage). The database
  loops log the outage and the recovery themselves (`gloveapp.lib.db`).

`OutageLog` is the same rule for code that fails for want of a service (the task queue's
Redis): the first failure warns in one line, the first success after says it is back.
"""

from __future__ import annotations

import logging
import threading
import time

from gloveapp.lib.db.outages import is_transaction_conflict

OUTAGE_GAP_SECONDS = 60.0


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())[:300]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class RefusalFilter(logging.Filter):
    def __init__(self, name: str = "") -> None:
        super().__init__(name)
        self._lock = threading.Lock()
        self._last_503 = float("-inf")

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        refused = record.name.startswith("django.security.RequestDataTooBig") or (
            record.name == "django.request" and isinstance(status, int) and 400 <= status < 500
        )
        error = record.exc_info[1] if record.exc_info else None
        if status == 503 and record.name == "django.request" and is_transaction_conflict(error):
            # Not an outage: the database ended a transaction that conflicted with another
            # (a deadlock: a bug of lock order). Each one is said, as what it is.
            said = record.getMessage()
            record.msg = "%s (a transaction conflict, answered 503 with Retry-After: %s)"
            record.args = (said, _one_line(error))
            record.exc_info = record.exc_text = record.stack_info = None
            return True
        if status == 503 and record.name == "django.request":
            now = time.monotonic()
            with self._lock:
                new_outage = now - self._last_503 > OUTAGE_GAP_SECONDS
                self._last_503 = now
            if not new_outage:
                return False
            said = record.getMessage()
            record.msg = "%s (the database is away: answering 503 until it is back%s)"
            record.args = (
                said,
                f"; {_one_line(error)}" if error is not None else "",
            )
            refused = True
        if refused:
            record.exc_info = None
            record.exc_text = None
            record.stack_info = None
        return True


class OutageLog:
    """One warning when `service` first fails, one when it answers again."""

    def __init__(self, logger: logging.Logger, service: str) -> None:
        self.logger = logger
        self.service = service
        self._lock = threading.Lock()
        self._since: float | None = None
        self.failures = 0

    def failed(self, error: BaseException, consequence: str) -> None:
        with self._lock:
            self.failures += 1
            first = self._since is None
            if first:
                self._since = time.monotonic()
        if first:
            self.logger.warning(
                "%s is away (%s); %s. Said once until it is back.",
                self.service,
                _one_line(error),
                consequence,
            )
        else:
            self.logger.debug("%s still away: %s", self.service, _one_line(error))

    def answered(self) -> None:
        if self._since is None:  # the common case: no lock
            return
        with self._lock:
            if self._since is None:
                return
            away, self._since = time.monotonic() - self._since, None
            failures, self.failures = self.failures, 0
        self.logger.warning(
            "%s is back after %.1f s (%d failures meanwhile)", self.service, away, failures
        )
