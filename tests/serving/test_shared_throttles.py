"""Issue 22: throttles were per process, so production's several processes multiplied every
budget. Two server processes on one database now share it: DRF's throttles count in the
shared cache (the database's `glove_cache`, or Redis when REDIS_URL is set), the per-user
turn limit counts stored turns, and django-axes counts failed logins in the database."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator

import httpx
import pytest
import redis

from tests.api.liveserver import LiveServer
from tests.api.test_chat import CHAT_BODY

pytestmark = [pytest.mark.timeout(300)]


def _pair(extra_env: dict) -> Iterator[tuple[LiveServer, LiveServer]]:
    env = {"GLOVE_CHAT_RATE": "3/min", **extra_env}
    with LiveServer(extra_env=env) as first, LiveServer(sharing=first, extra_env=env) as second:
        yield first, second


def _chat(server: LiveServer, token: str) -> int:
    with httpx.Client(timeout=60) as http:
        response = http.post(
            f"{server.url}/api/chat", json=CHAT_BODY, headers={"Authorization": f"Token {token}"}
        )
        return response.status_code


def _spend_the_budget_across(first: LiveServer, second: LiveServer) -> list[int]:
    token = first.token_for(f"user-{secrets.token_hex(3)}")
    return [_chat(server, token) for server in (first, second, first, second, first)]


@pytest.mark.process
def test_two_processes_share_the_chat_budget_and_the_login_lockout_in_the_database():
    for first, second in _pair({"REDIS_URL": "", "AXES_FAILURE_LIMIT": "3"}):
        statuses = _spend_the_budget_across(first, second)
        assert [status == 429 for status in statuses] == [False, False, False, True, True]
        logins = _fail_logins_across(first, second)
        assert logins[-1] == 429 and 429 not in logins[:2]


@pytest.mark.process
@pytest.mark.redis
def test_two_processes_share_the_chat_budget_in_redis(redis_url):
    redis.Redis.from_url(redis_url).flushdb()
    for first, second in _pair({"REDIS_URL": redis_url}):
        statuses = _spend_the_budget_across(first, second)
        assert [status == 429 for status in statuses] == [False, False, False, True, True]


def _fail_logins_across(first: LiveServer, second: LiveServer) -> list[int]:
    username = f"nobody-{secrets.token_hex(4)}"
    statuses = []
    for server in (first, second, first, second):
        with httpx.Client(base_url=server.url, timeout=60) as http:
            page = http.get("/accounts/login/")
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]
            answer = http.post(
                "/accounts/login/",
                data={"username": username, "password": "wrong", "csrfmiddlewaretoken": token},
                headers={"Referer": f"{server.url}/accounts/login/"},
            )
            statuses.append(answer.status_code)
    return statuses
