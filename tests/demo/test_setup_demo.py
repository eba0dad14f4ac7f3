"""`manage.py setup_demo`, which `make run` calls on every start."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command
from django.test import RequestFactory

from gloveapp.conversations.models import Session
from gloveapp.demo.models import Coffee

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def setup_demo() -> str:
    out = StringIO()
    call_command("setup_demo", stdout=out)
    return out.getvalue()


def test_it_creates_a_customer_a_staff_member_and_a_first_chat(monkeypatch):
    monkeypatch.delenv("DEMO_PASSWORD", raising=False)
    monkeypatch.delenv("STAFF_PASSWORD", raising=False)

    output = setup_demo()

    # A request, as every login carries: the lockout (django-axes) counts per address.
    request = RequestFactory().post("/accounts/login/")
    assert authenticate(request, username="demo", password="demo-coffee") is not None
    staff = authenticate(request, username="staff", password="staff-coffee")
    assert staff.is_staff and staff.is_superuser
    session = Session.objects.get(owner__username="demo")
    assert session.agent_name == "coffee"
    assert Coffee.objects.get(pk="yirgacheffe").stock == 0
    assert "demo / demo-coffee" in output
    assert "staff / staff-coffee" in output
    assert "http://127.0.0.1:8000/admin/" in output
    assert f"/sessions/{session.pk}/" in output
    assert "Offline demo model" in output


def test_it_is_idempotent_and_keeps_changed_passwords(monkeypatch):
    monkeypatch.delenv("DEMO_PASSWORD", raising=False)
    monkeypatch.delenv("STAFF_PASSWORD", raising=False)
    setup_demo()
    demo = get_user_model().objects.get(username="demo")
    demo.set_password("my-own-password")
    demo.save()

    output = setup_demo()

    assert get_user_model().objects.filter(username__in=["demo", "staff"]).count() == 2
    assert Session.objects.filter(owner__username="demo").count() == 1
    assert (
        authenticate(RequestFactory().post("/"), username="demo", password="my-own-password")
        is not None
    )
    assert "demo (existing account, password unchanged)" in output
    assert "staff / staff-coffee" in output  # still the default, so still worth printing


def test_it_takes_passwords_from_the_environment(monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "from-the-env-1")
    monkeypatch.setenv("STAFF_PASSWORD", "from-the-env-2")

    setup_demo()
    setup_demo()

    assert (
        authenticate(RequestFactory().post("/"), username="demo", password="from-the-env-1")
        is not None
    )
    assert (
        authenticate(RequestFactory().post("/"), username="staff", password="from-the-env-2")
        is not None
    )


def test_it_keeps_staff_stock_changes():
    setup_demo()
    Coffee.objects.filter(pk="yirgacheffe").update(stock=5)

    setup_demo()

    assert Coffee.objects.get(pk="yirgacheffe").stock == 5


def test_its_ready_banner_shows_the_way_to_the_workspace_inbox():
    output = setup_demo()

    assert "http://127.0.0.1:8000/inbox/" in output
    assert "create_workspace --label Research --root ~/research" in output
    assert "--write" in output and "inbox_read" in output
    assert "docs/tutorial/index.md" in output
