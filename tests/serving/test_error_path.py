"""An error page always finishes and gives its connection back, DEBUG's technical page too.

With DEBUG on (as `make run` runs), an error whose message or locals held a lone surrogate
broke Django's technical 500 page while it was encoded: the request never finished, its
pooled connection never went back, and after as many such requests as the pool holds every
database request of the process, for every user, waited out the pool's timeout. Here a
server (Daphne, as `make run`) with a pool of 3 answers 12 such requests, then a reader.
"""

from __future__ import annotations

import os

import httpx
import pytest

from gloveapp.lib.http.last_resort import BARE_500
from tests.api.liveserver import LiveServer

POOL = 3
FAILURES = 12


@pytest.fixture(scope="module")
def debug_server():
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        pytest.skip("runs in the PostgreSQL pass (psycopg's pool)")
    env = {
        "DJANGO_SETTINGS_MODULE": "tests.serving.raising_settings",
        "DEBUG": "1",
        "DB_POOL_SIZE": str(POOL),
        "GLOVE_DB_CONNECT_TIMEOUT_SECONDS": "3",
    }
    with LiveServer(database_url=url, extra_env=env) as server:
        yield server


@pytest.mark.postgres
@pytest.mark.process
def test_technical_500_pages_never_hold_a_pooled_connection(debug_server):
    token = debug_server.token_for("ann")
    with httpx.Client(base_url=debug_server.url, timeout=20) as client:
        failed = [client.get("/raise-unencodable") for _ in range(FAILURES)]
        read = client.get("/api/sessions", headers={"Authorization": f"Token {token}"})

    assert [r.status_code for r in failed] == [500] * FAILURES
    assert read.status_code == 200, read.text


@pytest.mark.postgres
@pytest.mark.process
def test_the_technical_page_shows_the_unencodable_text_escaped(debug_server):
    with httpx.Client(base_url=debug_server.url, timeout=20) as client:
        page = client.get("/raise-unencodable", headers={"Accept": "text/html"})

    assert page.status_code == 500
    assert "UnicodeEncodeError" in page.text
    assert "\\ud800" in page.text


@pytest.mark.django_db
def test_an_error_page_that_fails_itself_still_ends_in_a_bare_500(settings, client):
    """Django's own reporter (its page unencodable): the outermost middleware answers."""
    settings.ROOT_URLCONF = "tests.serving.raising_urls"
    settings.DEBUG = True
    settings.DEFAULT_EXCEPTION_REPORTER = "django.views.debug.ExceptionReporter"
    client.raise_request_exception = False

    response = client.get("/raise-unencodable", headers={"Accept": "text/html"})

    assert response.status_code == 500
    assert response.content == BARE_500
