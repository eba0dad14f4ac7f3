"""The suite's own PostgreSQL connections: bounded, and a refusal explained in plain words.

The PostgreSQL server is shared (several suites, other programs): a test that opens one
connection per thread must fit in what is left of `max_connections`, and when the server
refuses anyway the failure must say why instead of a bare "too many clients already".
"""

from __future__ import annotations

import secrets

import psycopg
import pytest

from tests.conftest import service_missing
from tests.pg_budget import concurrency_for, explain_refusal, free_connections
from tests.servers import run_postgres_admin_url


@pytest.fixture
def pg_admin():
    try:
        conn = psycopg.connect(run_postgres_admin_url(), autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        service_missing(f"PostgreSQL is not reachable: {exc}")
    with conn:
        yield conn


def test_it_counts_the_connections_the_server_has_left(pg_admin):
    # The server is shared with the suite's other passes, which open and close connections
    # meanwhile: one opening of ours must be seen as exactly one fewer at least once.
    seen = []
    for _ in range(20):
        before = free_connections(pg_admin)
        extra = psycopg.connect(run_postgres_admin_url(), connect_timeout=3)
        try:
            seen.append(before - free_connections(pg_admin))
        finally:
            extra.close()
        if seen[-1] == 1:
            break
    assert 1 in seen, seen


def test_it_caps_a_concurrency_test_to_what_is_left_with_room_to_spare():
    assert concurrency_for(50, free=200) == 50
    assert concurrency_for(50, free=30) == 30 - 10
    assert concurrency_for(50, free=13) == 3


def test_it_shares_what_is_left_among_the_test_processes():
    assert concurrency_for(50, free=70, processes=3) == 20
    assert concurrency_for(50, free=13, processes=3) == 2


def test_it_fails_clearly_when_too_few_connections_are_left():
    with pytest.raises(pytest.fail.Exception, match="only 11 of its connections are free"):
        concurrency_for(50, free=11)


def test_it_explains_a_refused_connection_in_plain_words(pg_admin):
    # A role allowed no connections is refused as a full server refuses everyone (a
    # superuser would be let in past a database's limit).
    role = f"glove_full_{secrets.token_hex(4)}"
    pg_admin.execute(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 0')
    try:
        scheme, _, rest = run_postgres_admin_url().partition("://")
        with pytest.raises(psycopg.OperationalError) as refused:
            psycopg.connect(f"{scheme}://{role}@{rest.partition('@')[2]}", connect_timeout=3)
        text = explain_refusal(refused.value)
    finally:
        pg_admin.execute(f'DROP ROLE "{role}"')

    assert text is not None
    assert "PostgreSQL refused a connection" in text
    assert "max_connections" in text
    assert "run fewer suites at once" in text


def test_it_leaves_other_errors_alone():
    assert explain_refusal(ValueError("too many clients")) is None
    assert explain_refusal(psycopg.OperationalError("connection timeout expired")) is None
