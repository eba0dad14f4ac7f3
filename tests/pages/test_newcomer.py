"""What a newcomer meets first: a favicon, a login page that names the demo logins, and a
login that locks after repeated failures (the admin's too)."""

from __future__ import annotations

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

from gloveapp.demo.bootstrap import DEFAULT_DEMO_PASSWORD, DEFAULT_STAFF_PASSWORD, demo_setup
from tests.pages.conftest import PASSWORD


def test_it_serves_a_favicon_instead_of_a_404(db):
    client = Client()

    page = client.get("/accounts/login/")
    legacy = client.get("/favicon.ico")

    assert 'rel="icon"' in page.content.decode()
    assert legacy.status_code == 301
    assert legacy["Location"].endswith("/static/favicon.svg")
    assert finders.find("favicon.svg")


@pytest.fixture
def hint_on(db, settings) -> None:
    settings.GLOVE_DEMO_LOGIN_HINT = True  # as under `make run` (DEBUG on)


def test_it_hints_the_demo_logins_while_they_still_have_the_demo_passwords(hint_on):
    demo_setup()

    page = Client().get("/accounts/login/").content.decode()

    assert "demo" in page and DEFAULT_DEMO_PASSWORD in page
    assert "staff" in page and DEFAULT_STAFF_PASSWORD in page


def test_it_gives_no_hint_once_the_demo_passwords_are_changed(hint_on):
    demo_setup(demo_password="a-real-secret-1", staff_password="a-real-secret-2")

    page = Client().get("/accounts/login/").content.decode()

    assert DEFAULT_DEMO_PASSWORD not in page
    assert "a-real-secret" not in page


def test_it_checks_each_demo_password_once_not_on_every_view(hint_on, monkeypatch):
    # A password check is deliberately slow: four per anonymous view made the login page
    # take seconds on a busy machine (and cost the server as much per request).
    from django.contrib.auth import get_user_model

    from gloveapp.demo import bootstrap

    demo_setup()
    checks = []
    real_check = bootstrap.check_password
    monkeypatch.setattr(
        bootstrap, "check_password", lambda *args: checks.append(args) or real_check(*args)
    )
    bootstrap._is_password.cache_clear()

    first = Client().get("/accounts/login/").content.decode()
    counted = len(checks)
    second = Client().get("/accounts/login/").content.decode()
    demo = get_user_model().objects.get(username="demo")
    demo.set_password("a-real-secret-3")
    demo.save()
    third = Client().get("/accounts/login/").content.decode()

    assert DEFAULT_DEMO_PASSWORD in first and DEFAULT_DEMO_PASSWORD in second
    assert counted >= 2 and len(checks) == counted + 1  # only the changed hash again
    assert DEFAULT_DEMO_PASSWORD not in third and DEFAULT_STAFF_PASSWORD in third


def test_it_gives_no_hint_without_the_demo(hint_on):
    page = Client().get("/accounts/login/").content.decode()

    assert DEFAULT_DEMO_PASSWORD not in page


def test_it_gives_no_hint_in_production(db, settings):
    settings.GLOVE_DEMO_LOGIN_HINT = False
    demo_setup()

    page = Client().get("/accounts/login/").content.decode()

    assert DEFAULT_DEMO_PASSWORD not in page


@pytest.mark.parametrize("login_url", ["/accounts/login/", "/admin/login/"])
def test_it_locks_a_login_after_repeated_failures(login_url, staff, settings):
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post(login_url, {"username": staff.username, "password": "wrong"})

    right = client.post(login_url, {"username": staff.username, "password": PASSWORD})

    assert right.status_code == 429
    assert "_auth_user_id" not in client.session


def test_it_lets_the_right_password_in_after_a_few_failures(staff, settings):
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        client.post("/accounts/login/", {"username": staff.username, "password": "wrong"})

    right = client.post("/accounts/login/", {"username": staff.username, "password": PASSWORD})

    assert right.status_code == 302
    assert client.session["_auth_user_id"] == str(staff.pk)
