"""Read replicas: reads that tolerate lag go to a replica, everything else to the primary.

`DATABASE_REPLICA_URLS` names streaming replicas of the primary (`DATABASE_URL`); each
becomes a database alias (`replica1`, `replica2`, ...) and `ReplicaRouter` routes. A read goes
to a replica only where it was declared to tolerate lag:

- a request the `LagTolerantReads` middleware lets through: a GET of an admin changelist, or
  of a view marked with `@reads_may_lag`;
- code inside `with lag_tolerant():` (the decided approvals' history over REST).

Everything else reads the primary: a chat's history right after its own append, the turn
worker, the relay, idempotency keys, open approvals. And a person who has just written
(any POST, PUT, PATCH or DELETE) reads the primary for `GLOVE_REPLICA_PIN_SECONDS` after it
(a cookie), so an admin list shows the change its reader just made even while the replica
lags. Writes always go to the primary; migrations run there only (replicas follow by WAL).
"""

from __future__ import annotations

import contextlib
import contextvars
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS

REPLICA_PREFIX = "replica"
PIN_COOKIE = "glove_primary_until"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

_lag_ok: contextvars.ContextVar[bool] = contextvars.ContextVar("glove_lag_ok", default=False)


def replica_aliases() -> list[str]:
    return [alias for alias in settings.DATABASES if alias.startswith(REPLICA_PREFIX)]


@contextlib.contextmanager
def lag_tolerant() -> Iterator[None]:
    """Reads inside may come from a replica a few seconds behind the primary."""
    token = _lag_ok.set(True)
    try:
        yield
    finally:
        _lag_ok.reset(token)


def reads_may_lag[View: Callable[..., Any]](view: View) -> View:
    """Mark a view (function or class) whose GETs may read a replica."""
    view.reads_may_lag = True  # type: ignore[attr-defined]
    return view


class ReplicaRouter:
    """Reads declared lag-tolerant go to a replica; every other read and every write to
    the primary."""

    def db_for_read(self, model: Any, **hints: Any) -> str:
        replicas = replica_aliases()
        if replicas and _lag_ok.get():
            return random.choice(replicas)
        return DEFAULT_DB_ALIAS

    def db_for_write(self, model: Any, **hints: Any) -> str:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True  # the replicas hold the primary's rows

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return not db.startswith(REPLICA_PREFIX)


def _lag_tolerant_view(request: Any, view_func: Any) -> bool:
    if request.method not in SAFE_METHODS:
        return False
    if getattr(view_func, "reads_may_lag", False) or getattr(
        getattr(view_func, "cls", None), "reads_may_lag", False
    ):
        return True
    match = getattr(request, "resolver_match", None)
    return bool(
        match is not None
        and match.namespace == "admin"
        and (match.url_name or "").endswith("_changelist")
    )


def pinned_to_primary(request: Any) -> bool:
    """Whether the request's reader wrote a moment ago (their reads stay on the primary)."""
    try:
        return float(request.COOKIES.get(PIN_COOKIE, "0")) > time.time()
    except ValueError:
        return False


class LagTolerantReads:
    """Lets a lag-tolerant GET read a replica, unless its reader wrote a moment ago; after
    a write, pins its reader to the primary for GLOVE_REPLICA_PIN_SECONDS. With no replica
    configured it does nothing."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        # process_view below may let this request's reads lag; the reset ends that with it.
        token = _lag_ok.set(False)
        try:
            response = self.get_response(request)
        finally:
            _lag_ok.reset(token)
        if request.method not in SAFE_METHODS and replica_aliases():
            seconds = settings.GLOVE_REPLICA_PIN_SECONDS
            response.set_cookie(
                PIN_COOKIE,
                f"{time.time() + seconds:.3f}",
                max_age=int(seconds) + 1,
                httponly=True,
                samesite="Lax",
                secure=request.is_secure(),
            )
        return response

    def process_view(self, request: Any, view_func: Any, view_args: Any, view_kwargs: Any):
        if (
            replica_aliases()
            and not pinned_to_primary(request)
            and _lag_tolerant_view(request, view_func)
        ):
            _lag_ok.set(True)
        return None
