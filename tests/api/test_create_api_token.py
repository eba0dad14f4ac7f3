"""`manage.py create_api_token USER`: the token a remote store authenticates with."""

from __future__ import annotations

from io import StringIO

import httpx
import pytest
from django.core.management import CommandError, call_command

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def run(*args: str) -> str:
    out = StringIO()
    call_command("create_api_token", *args, stdout=out)
    return out.getvalue().strip()


def test_it_prints_a_token_that_opens_the_api(owner, client):
    token = run("owner")
    response = client.get("/api/sessions", HTTP_AUTHORIZATION=f"Token {token}")
    assert response.status_code == 200


def test_it_prints_the_same_token_again_until_rotated(owner, client):
    first = run("owner")
    assert run("owner") == first
    rotated = run("owner", "--rotate")
    assert rotated != first
    assert client.get("/api/sessions", HTTP_AUTHORIZATION=f"Token {first}").status_code == 401


def test_it_refuses_an_unknown_user_unless_asked_to_create_it(django_user_model):
    with pytest.raises(CommandError, match="No user"):
        run("nobody")
    assert run("robot", "--create-user")
    assert django_user_model.objects.filter(username="robot").exists()


@pytest.mark.process
def test_the_command_on_a_live_server_agrees_with_the_tests_shortcut(live_server_process):
    """The real command in a process of its own, on a live server's database: the token it
    prints opens the API there, and `LiveServer.token_for` (which writes users and tokens
    straight into that database) finds it, and the command finds the shortcut's."""
    server = live_server_process
    printed = server.manage("create_api_token", "command-made", "--create-user").strip()
    answer = httpx.get(
        f"{server.url}/api/sessions", headers={"Authorization": f"Token {printed}"}, timeout=30
    )
    assert answer.status_code == 200
    assert server.token_for("command-made") == printed

    written = server.token_for("shortcut-made")
    assert server.manage("create_api_token", "shortcut-made").strip() == written
