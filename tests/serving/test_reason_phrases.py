"""Daphne answers every status with its standard reason phrase ("429 Too Many Requests",
not Twisted's "429 Unknown Status")."""

from __future__ import annotations

import re
import secrets

import httpx
import pytest

pytestmark = [pytest.mark.postgres]


def test_it_answers_a_locked_login_with_429_too_many_requests(live_server_process):
    url = live_server_process.url
    username = f"nobody-{secrets.token_hex(4)}"  # locked alone: other tests log in freely
    with httpx.Client(base_url=url, timeout=30) as http:
        for _ in range(6):
            page = http.get("/accounts/login/")
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]
            answer = http.post(
                "/accounts/login/",
                data={"username": username, "password": "wrong", "csrfmiddlewaretoken": token},
                headers={"Referer": f"{url}/accounts/login/"},
            )

    assert answer.status_code == 429
    assert answer.reason_phrase == "Too Many Requests"
