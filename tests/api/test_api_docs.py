"""The API's front door: /api/ lists what is there, /api/docs/ works without the internet."""

from __future__ import annotations

import re

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_it_serves_the_swagger_ui_from_this_server_not_a_cdn():
    client = Client()

    page = client.get("/api/docs/")
    html = page.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css))"', html)

    assert page.status_code == 200
    assert assets, html
    assert not re.search(r'(?:src|href)="(?:https?:)?//', html), "an asset from another host"
    for asset in assets:
        answer = client.get(asset)
        assert answer.status_code == 200, asset


def test_it_lists_the_api_at_its_root():
    page = Client().get("/api/")
    html = page.content.decode()

    assert page.status_code == 200
    assert 'href="/api/docs/"' in html
    assert 'href="/api/schema/"' in html
    for route in ("/api/sessions", "/api/chat", "/api/inbox/resolve"):
        assert route in html
