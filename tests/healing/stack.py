"""The stack a healing test breaks: a server and two turn workers on a PostgreSQL (and, for
RQ, a Redis) of the test's own, a logged-in user posting messages, and the checks that
nothing acknowledged was lost, duplicated or left unfinished."""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx
import psycopg

from tests.api.liveserver import LiveServer

PASSWORD = "pw-ann-healing-1"


def until(condition, timeout: float = 60.0, interval: float = 0.1):
    """Poll `condition` until it returns something true, at most `timeout` seconds; that
    result, or the last false one (the caller asserts, naming what it waited for)."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(interval)


class Browser:
    """A logged-in user of one server (cookies and CSRF, as a form post sends them)."""

    def __init__(self, server: LiveServer, username: str = "ann") -> None:
        self.client = httpx.Client(base_url=server.url, timeout=30, follow_redirects=False)
        page = self.client.get("/accounts/login/")
        match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert match, "no CSRF token on the login page"
        self.client.post(
            "/accounts/login/",
            data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": match[1]},
        )

    def post(self, path: str, data: dict) -> httpx.Response:
        token = self.client.cookies.get("csrftoken")
        return self.client.post(path, data={**data, "csrfmiddlewaretoken": token})

    def new_session(self) -> str:
        response = self.post("/sessions/new", {})
        assert response.status_code == 303, response.text
        return response.headers["Location"].strip("/").split("/")[-1]


@dataclass
class Load:
    """Messages posted to several chats; which of them the server acknowledged (303)."""

    browser: Browser
    sessions: list[str]
    acknowledged: dict[str, list[str]] = field(default_factory=dict)
    refused: Counter = field(default_factory=Counter)  # status code (or error) -> count

    def post_round(self, label: str) -> None:
        for session_id in self.sessions:
            text = f"show me the menu ({label}, {session_id})"
            try:
                status = self.browser.post(
                    f"/sessions/{session_id}/messages", {"text": text}
                ).status_code
            except httpx.HTTPError as error:
                status = type(error).__name__
            if status == 303:
                self.acknowledged.setdefault(session_id, []).append(text)
            else:
                self.refused[status] += 1

    @property
    def count(self) -> int:
        return sum(len(texts) for texts in self.acknowledged.values())


def query(database_url: str, sql: str, *args: object) -> list[tuple]:
    with psycopg.connect(database_url, autocommit=True, connect_timeout=5) as conn:
        return conn.execute(sql, args).fetchall()


def unfinished_turns(database_url: str) -> int:
    try:
        rows = query(
            database_url,
            "SELECT count(*) FROM turns_turn WHERE status IN ('queued', 'running', 'waiting')",
        )
    except psycopg.OperationalError:
        return -1  # the database is still away
    return rows[0][0]


def wait_until_finished(database_url: str, timeout: float) -> float | None:
    """Seconds until no turn is queued or running, or None if that never happened."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if unfinished_turns(database_url) == 0:
            return time.monotonic() - started
        time.sleep(0.1)
    return None


def check_exactly_once(database_url: str, load: Load) -> None:
    """Every acknowledged message is stored once and answered once, its tool call has one
    result, and every turn ended as done."""
    statuses = dict(
        query(
            database_url,
            "SELECT status, count(*) FROM turns_turn WHERE session_id = ANY(%s) GROUP BY 1",
            load.sessions,
        )
    )
    assert statuses == {"done": load.count}, statuses
    for session_id, texts in load.acknowledged.items():
        rows = query(
            database_url,
            "SELECT sender, text, tool_calls, tool_results FROM conversations_message "
            "WHERE session_id = %s AND framework_context IS NULL ORDER BY seq",
            session_id,
        )
        asked = [text for sender, text, _, results in rows if sender == "user" and not results]
        assert asked == texts, (session_id, asked, texts)
        call_ids = [call["id"] for _, _, calls, _ in rows for call in calls or []]
        result_ids = [result["call_id"] for _, _, _, results in rows for result in results or []]
        assert len(call_ids) == len(set(call_ids)), (session_id, "a tool call twice", rows)
        assert sorted(result_ids) == sorted(call_ids), (session_id, "tool results", rows)
        # One answer per message: user and agent take turns (a reply stored twice, or a
        # request asked twice, would put two of one side in a row), tool calls are followed
        # by their results, and each message's exchange ends with the agent's reply.
        senders = [sender for sender, *_ in rows]
        assert senders == ["user", "agent"] * (len(rows) // 2), (session_id, rows)
        for (_, _, calls, _), (_, _, _, results) in zip(rows[1::2], rows[2::2], strict=False):
            if calls:
                assert [r["call_id"] for r in results or []] == [c["id"] for c in calls], rows
        finals = [
            index
            for index, (sender, _, calls, _) in enumerate(rows)
            if sender == "agent" and not calls
        ]
        requests = [
            index
            for index, (sender, _, _, results) in enumerate(rows)
            if sender == "user" and not results
        ]
        for request, following in zip(requests, [*requests[1:], len(rows)], strict=True):
            assert any(request < final < following for final in finals), (session_id, rows)
