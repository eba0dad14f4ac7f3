"""Whatever a cut connection raises through psycopg is an outage: a 503 with Retry-After,
never a 500. PgBouncer, restarting PostgreSQL behind it, handed a request's BEGIN the
results of another ("received 2 results from command 'BEGIN'", psycopg's client-side
InternalError), which the server answered 500 (tests/healing/test_database_away.py
replays the restart itself); a deadlock is a 503 too, logged as a conflict, not as an
outage."""

from __future__ import annotations

import logging

import psycopg
import pytest
from django.db import InternalError as DjangoInternalError
from django.db import connection

from gloveapp.lib.logs import RefusalFilter

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def _failing_with(error: BaseException):
    def fail(execute, sql, params, many, context):
        raise error

    return fail


def _wrapped(error: psycopg.Error) -> DjangoInternalError:
    try:
        raise error
    except psycopg.Error as cause:
        wrapped = DjangoInternalError(*cause.args)
        wrapped.__cause__ = cause
        return wrapped


@pytest.mark.parametrize(
    "error",
    [
        psycopg.InternalError("received 2 results from command 'BEGIN'"),
        _wrapped(psycopg.InternalError("received 2 results from command 'BEGIN'")),
        _wrapped(psycopg.InternalError("got no result from the query")),
        psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
        psycopg.InterfaceError("the connection is lost"),
    ],
    ids=["psycopg-internal", "django-internal", "no-result", "admin-shutdown", "lost"],
)
def test_an_error_of_a_cut_connection_is_a_503_with_retry_after(owner_client, session_id, error):
    owner_client.raise_request_exception = False

    with connection.execute_wrapper(_failing_with(error)):
        answer = owner_client.get(f"/api/sessions/{session_id}/messages")

    assert answer.status_code == 503
    assert answer["Retry-After"] == "2"
    assert "database is unavailable" in answer.json()["error"]
    # The connection that raised it is not used again: the next request is answered.
    assert owner_client.get(f"/api/sessions/{session_id}/messages").status_code == 200


def test_a_deadlock_is_a_503_logged_as_a_conflict_not_an_outage(owner_client, session_id):
    owner_client.raise_request_exception = False
    deadlock = psycopg.errors.DeadlockDetected("deadlock detected")

    with connection.execute_wrapper(_failing_with(deadlock)):
        answer = owner_client.get(f"/api/sessions/{session_id}/messages")

    assert answer.status_code == 503
    assert answer["Retry-After"] == "2"
    assert "conflicted" in answer.json()["error"]
    # What the console handler's filter makes of Django's log line for that 503.
    logged = logging.makeLogRecord(
        {
            "name": "django.request",
            "msg": "%s: %s",  # as Django's log_response words it
            "args": ("Service Unavailable", "/api/sessions/x/messages"),
            "status_code": 503,
            "exc_info": (type(deadlock), deadlock, None),
        }
    )
    assert RefusalFilter().filter(logged)
    assert "a transaction conflict" in logged.getMessage()
    assert "DeadlockDetected" in logged.getMessage()
    assert "database is away" not in logged.getMessage()


def test_a_bad_statement_is_still_a_500(owner_client, session_id):
    owner_client.raise_request_exception = False
    bug = psycopg.errors.UndefinedColumn("column x does not exist")

    with connection.execute_wrapper(_failing_with(bug)):
        answer = owner_client.get(f"/api/sessions/{session_id}/messages")

    assert answer.status_code == 500
