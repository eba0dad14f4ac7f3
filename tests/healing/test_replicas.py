"""Read replicas: lag-tolerant reads go to a streaming replica, a chat never misses its own
message, and a person who just wrote reads the primary.

A primary and a real streaming replica of it (`pg_basebackup -R`, tests/servers.py), the
replica held behind by pausing its replay (a replica as far behind as the test needs, with
no timing to race); the server runs with `DATABASE_REPLICA_URLS` naming it. Each server is
reached through a PgBouncer of its own in transaction mode (the production topology).
"""

from __future__ import annotations

import httpx
import pytest

from tests.api.liveserver import LiveServer, add_user
from tests.conftest import service_missing
from tests.healing.stack import PASSWORD, Browser, query, until
from tests.servers import (
    PgBouncer,
    PostgresServer,
    ReplicaServer,
    pg_bindir,
    pgbouncer_binary,
    through_pgbouncer,
)

PIN_COOKIE = "glove_primary_until"


def make_staff(database_url: str, username: str) -> None:
    add_user(database_url, username, PASSWORD)
    query(
        database_url,
        "UPDATE auth_user SET is_staff = true, is_superuser = true WHERE username = %s RETURNING id",
        username,
    )


def listed_in_admin(browser: Browser, session_id: str) -> bool:
    from django.contrib.admin.utils import quote

    page = browser.client.get("/admin/conversations/session/")
    assert page.status_code == 200, page.text[-2000:]
    return f"/admin/conversations/session/{quote(session_id)}/" in page.text


@pytest.mark.faults
@pytest.mark.timeout(240)
def test_lag_tolerant_reads_use_the_replica_and_a_chat_reads_its_own_writes():
    if pg_bindir() is None:
        service_missing("PostgreSQL's server binaries (initdb, pg_ctl, pg_basebackup)")
    if pgbouncer_binary() is None:
        service_missing("pgbouncer is not installed (apt-get install pgbouncer)")
    with (
        PostgresServer() as primary,
        ReplicaServer(primary) as replica,
        PgBouncer(primary) as primary_bouncer,
        PgBouncer(replica) as replica_bouncer,
    ):
        server = LiveServer(database_url=primary.url(), extra_env={"REDIS_URL": ""})
        through_pgbouncer(server, primary_bouncer)
        name = server.database_url.rpartition("/")[2]
        server.env["DATABASE_REPLICA_URLS"] = replica_bouncer.url(name)
        with server:
            add_user(server.database_url, "ann", PASSWORD)
            make_staff(server.database_url, "sam")
            assert until(replica.caught_up), "the replica did not catch up"
            ann = Browser(server)
            sam = Browser(server, "sam")
            sam.client.cookies.delete(PIN_COOKIE)  # logging in was a write: start unpinned
            token = server.token_for("ann")
            api = httpx.Client(
                base_url=server.url, headers={"Authorization": f"Token {token}"}, timeout=30
            )

            replica.pause()  # from here on the replica shows nothing new
            session_id = ann.new_session()
            sent = ann.post(f"/sessions/{session_id}/messages", {"text": "a latte, please"})
            assert sent.status_code == 303
            # The chat reads its own writes at once, on its page and over REST.
            assert "a latte, please" in ann.client.get(f"/sessions/{session_id}/").text
            appended = api.post(
                f"/api/sessions/{session_id}/messages",
                json={"messages": [{"sender": "user", "text": "and a croissant"}]},
            )
            assert appended.status_code in (200, 201), appended.text
            history = api.get(f"/api/sessions/{session_id}/messages")
            assert "and a croissant" in [m["text"] for m in history.json()]

            # The admin's list reads the replica, which has not seen the new chat...
            assert not listed_in_admin(sam, session_id)
            # ...unless its reader has just written: then the primary, for a moment.
            sam.post(f"/sessions/{sam.new_session()}/messages", {"text": "hello"})
            assert PIN_COOKIE in sam.client.cookies
            assert listed_in_admin(sam, session_id)

            sam.client.cookies.delete(PIN_COOKIE)
            replica.resume()
            assert until(replica.caught_up), "the replica did not catch up"
            assert listed_in_admin(sam, session_id)  # the replica caught up


@pytest.mark.django_db
@pytest.mark.postgres
def test_without_replicas_nothing_is_pinned(client, django_user_model):
    """No replica configured: the router is off and no cookie is set on a write (in this
    process: no server of its own to start, and both passes run it)."""
    client.force_login(django_user_model.objects.create_user("ann"))
    created = client.post("/sessions/new")
    assert created.status_code == 303
    chat = created["Location"]
    assert client.post(f"{chat}messages", {"text": "hi there"}).status_code == 303
    assert PIN_COOKIE not in client.cookies
    assert "hi there" in client.get(chat).content.decode()
