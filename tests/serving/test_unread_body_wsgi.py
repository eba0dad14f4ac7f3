"""The WSGI edge reads what a refused request left unread (gloveapp/lib/http/unread_body.py),
which neither Django's WSGI handler nor granian does: the keep-alive connection stays
usable (tests/serving/test_unread_body.py shows it on granian itself)."""

from __future__ import annotations

import io

import pytest
from django.core.wsgi import get_wsgi_application

from gloveapp.lib.http.unread_body import drain_unread_bodies

pytestmark = pytest.mark.django_db


def _refused_post(application, body: bytes, declared: int) -> tuple[io.BytesIO, list]:
    """An anonymous POST (a 401, answered before its body is read)."""
    stream = io.BytesIO(body)
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/api/sessions/s1/messages",
        "QUERY_STRING": "",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "HTTP_HOST": "testserver",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(declared),
        "wsgi.input": stream,
        "wsgi.url_scheme": "http",
        "wsgi.errors": io.StringIO(),
    }
    started: list = []
    b"".join(application(environ, lambda status, headers, *_: started.extend([status, headers])))
    return stream, started


def test_a_refused_requests_unread_body_is_read_which_djangos_handler_leaves():
    body = b'{"messages": []}' * 1000
    stream, (status, _) = _refused_post(get_wsgi_application(), body, len(body))
    assert status.startswith("401") and stream.tell() < len(body)  # Django's: left unread

    stream, (status, headers) = _refused_post(
        drain_unread_bodies(get_wsgi_application()), body, len(body)
    )
    assert status.startswith("401") and stream.tell() == len(body)
    assert "connection" not in {name.lower() for name, _ in headers}


def test_a_body_that_cannot_be_read_to_its_end_closes_the_connection():
    _, (status, headers) = _refused_post(drain_unread_bodies(get_wsgi_application()), b"{}", 10_000)
    assert status.startswith("401") and ("Connection", "close") in headers
