"""WSGI entry point: the production HTTP server (granian, see `make serve-prod`; gunicorn too).

Plain HTTP costs no sync/async thread hop per middleware here. Websockets and `/mcp/` are
served by the ASGI application (`gloveapp.asgi`) in its own process; a proxy routes them.

Database connections: gunicorn's threads live as long as their worker, so each keeps its
connection (`DB_CONN_MAX_AGE`). granian's come and go (an idle one exits after a while, and
a connection kept by it would stay open, unreachable), so under granian connections come
from psycopg's pool (PostgreSQL; DB_POOL_SIZE, 10 per process unless set).
"""

from __future__ import annotations

import os
import sys

from gloveapp.conf import http_process_defaults

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gloveapp.settings")
# Read by the settings and the system checks: may connections be kept per thread here?
if "granian" in sys.modules:
    os.environ.setdefault("GLOVE_SERVER", "granian")
    os.environ.setdefault("DB_POOL_SIZE", "10")
else:
    os.environ.setdefault("GLOVE_SERVER", "wsgi")
# A request's statements are bounded (GLOVE_DB_STATEMENT_TIMEOUT_SECONDS) unless DEBUG.
http_process_defaults()

from django.core.exceptions import ImproperlyConfigured  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402

from gloveapp.lib.http.unread_body import drain_unread_bodies  # noqa: E402

# A refused request's unread body must not cost the client its next request on the same
# keep-alive connection (gloveapp/lib/http/unread_body.py).
application = drain_unread_bodies(get_wsgi_application())

from gloveapp.checks import leaky_connection_settings  # noqa: E402

# Servers run no system checks: refuse settings that would leave connections open (glove.E006).
if leaky := leaky_connection_settings():
    raise ImproperlyConfigured(
        f"DB_CONN_MAX_AGE > 0 leaks connections under granian ({', '.join(leaky)}): its "
        "threads come and go. Use DB_CONN_MAX_AGE=0 (PostgreSQL connections then come from "
        "psycopg's pool, DB_POOL_SIZE)."
    )
