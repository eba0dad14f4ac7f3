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


def test_every_header_the_schema_names_is_a_header_a_client_can_send(client):
    """A generated client sends each apiKey scheme's and header parameter's name as a header:
    each must be an HTTP token (the signed chat URL's was a sentence)."""
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    token = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
    names = [
        scheme["name"]
        for scheme in schema["components"]["securitySchemes"].values()
        if scheme.get("in") == "header"
    ]
    for operations in schema["paths"].values():
        for operation in operations.values():
            if isinstance(operation, dict):
                names += [
                    p["name"] for p in operation.get("parameters", []) if p.get("in") == "header"
                ]

    assert names and all(token.fullmatch(name) for name in names), names
    chat = schema["paths"]["/api/chat/{token}"]["post"]
    assert chat["security"] == [{}]
