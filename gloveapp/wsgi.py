"""WSGI entry point: the production HTTP server (gunicorn, see `make serve-prod`).

Plain HTTP costs no sync/async thread hop per middleware here, and each gunicorn thread keeps
its database connection (`DB_CONN_MAX_AGE`). Websockets are served by the ASGI application
(`gloveapp.asgi`) in its own process; a proxy routes `/ws/` there.
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gloveapp.settings")
# Read by the settings and the system checks: persistent connections are safe here.
os.environ.setdefault("GLOVE_SERVER", "wsgi")

from django.core.wsgi import get_wsgi_application

application = get_wsgi_application()
