"""The one rule every long-running loop follows when the database goes away
(`gloveapp.lib.db`): what counts as an outage, the bounded backoff, one log line when it goes and
one when it is back, and a broken connection replaced in the thread that holds it."""

from __future__ import annotations

import logging

import pytest
from django.db import IntegrityError, connection
from django.db.utils import OperationalError

from gloveapp.lib.db import outages
from gloveapp.lib.db.outages import (
    Backoff,
    close_broken_connections,
    healing,
    is_database_outage,
    retry_while_unreachable,
)
from tests.helpers import server_ends_connection


@pytest.fixture(autouse=True)
def _no_outage_yet():
    outages._outage.since = None
    yield
    outages._outage.since = None


def test_it_recognises_an_outage_whatever_wraps_it():
    try:
        try:
            raise OperationalError("server closed the connection unexpectedly")
        except OperationalError as lost:
            raise RuntimeError("could not claim") from lost
    except RuntimeError as wrapped:
        assert is_database_outage(wrapped)
    assert not is_database_outage(IntegrityError("duplicate key"))
    assert not is_database_outage(ValueError("a bug"))


def test_it_says_once_that_the_database_went_and_once_that_it_came_back(caplog):
    caplog.set_level(logging.WARNING, logger="gloveapp.lib.db")
    claims, relay = Backoff("claims"), Backoff("relay")
    delays = [claims.failed(OperationalError("connection refused")) for _ in range(8)]
    relay.failed(OperationalError("connection refused"))
    claims.succeeded()
    relay.succeeded()

    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith("the database is unreachable (OperationalError: connection")
    assert lines[1].startswith("the database is back")
    assert delays[0] == pytest.approx(0.1) and max(delays) == outages.BACKOFF_MAX_SECONDS
    assert delays == sorted(delays)


def test_it_logs_any_other_failure_whole(caplog):
    try:
        raise ValueError("a bug")
    except ValueError as bug:
        Backoff("watcher").failed(bug)

    assert [record.exc_info[0] for record in caplog.records] == [ValueError]


async def test_it_retries_a_call_until_the_database_answers(monkeypatch):
    monkeypatch.setattr(outages, "BACKOFF_FIRST_SECONDS", 0.001)
    outcomes = [OperationalError("refused"), OperationalError("starting up"), "claimed"]

    async def call():
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    assert await retry_while_unreachable("claim", call) == "claimed"


async def test_it_stops_retrying_when_asked_and_never_retries_a_bug():
    async def unreachable():
        raise OperationalError("refused")

    async def buggy():
        raise ValueError("a bug")

    with pytest.raises(OperationalError):
        await retry_while_unreachable("claim", unreachable, stopping=lambda: True)
    with pytest.raises(ValueError):
        await retry_while_unreachable("claim", buggy)


@pytest.mark.django_db(transaction=True)
def test_it_replaces_the_connection_a_failure_broke():
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    connection.errors_occurred = True  # as Django marks it when a statement fails

    @healing
    def claim():
        raise OperationalError("the connection is closed")

    with pytest.raises(OperationalError):
        claim()
    assert connection.connection is None  # closed: the next query opens a new one
    close_broken_connections()  # nothing left to close
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("requires_postgres")
def test_it_opens_a_new_connection_when_the_server_closed_the_idle_one():
    # A loop's thread keeps its connection out of the pool's reach: after a restart, its
    # first call must not fail on the connection the server closed (a mesh message that
    # arrived then was lost). Here the server ends one backend, as a restart ends them all.
    @healing
    def backend_pid() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return cursor.fetchone()[0]

    first = backend_pid()
    server_ends_connection(connection)
    second = backend_pid()  # no OperationalError: a new connection
    assert second != first
