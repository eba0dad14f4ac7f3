"""Behind PgBouncer in transaction mode nothing relies on a server connection's session:
each transaction may run on another one (`DATABASE_DIRECT_URL` set: the production
topology, docs/howto/deploy.md). The rest of tests/healing runs whole stacks through it."""

from __future__ import annotations

import pytest

from tests.api.liveserver import LiveServer, add_user
from tests.healing.stack import PASSWORD
from tests.servers import through_pgbouncer

pytestmark = [pytest.mark.faults, pytest.mark.timeout(180)]

# `.iterator()` reads a query in chunks; meanwhile another client takes the server connection
# the reading began on (PgBouncer hands out the one freed last), as a busy server's requests do.
ITERATE = """
import psycopg
from django.contrib.auth import get_user_model
users = get_user_model().objects.order_by("username").iterator(chunk_size=1)
names = [next(users).username]
with psycopg.connect({bouncer!r}) as other:
    other.execute("SELECT 1")  # a transaction: it holds its server connection till the end
    names += [user.username for user in users]
print(names)
"""


def test_a_query_read_in_chunks_survives_another_client_taking_its_server_connection(
    postgres, pgbouncer
):
    server = through_pgbouncer(LiveServer(database_url=postgres.url()), pgbouncer)
    server._create_migrated_database()  # no HTTP server: its database and settings only
    try:
        for name in ("ann", "bea", "cy"):
            add_user(server.database_url, name, PASSWORD)
        script = ITERATE.format(bouncer=server.env["DATABASE_URL"])
        said = server.manage("shell", "-c", script).strip().splitlines()[-1]
        assert said == "['ann', 'bea', 'cy']"
    finally:
        server.stop()
