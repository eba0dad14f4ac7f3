"""Refused requests and outages are one log line each, never a traceback per request.

Read through the project's own logging (settings.LOGGING's console handler and its filter),
with the handler's stream captured."""

from __future__ import annotations

import io
import logging

import pytest
from django.db import OperationalError
from django.http import HttpResponse
from django.test import Client, RequestFactory
from django.utils.log import log_response

from gloveapp.lib import logs
from gloveapp.lib.logs import OutageLog

pytestmark = pytest.mark.django_db


@pytest.fixture
def console():
    """What the project's console handler writes, as text."""
    [handler] = [
        h
        for h in logging.getLogger().handlers
        if isinstance(h, logging.StreamHandler)
        and any(isinstance(f, logs.RefusalFilter) for f in h.filters)
    ]
    captured = io.StringIO()
    original = handler.setStream(captured)
    yield captured
    handler.setStream(original)


@pytest.mark.parametrize("path", ["/accounts/login/", "/api/sessions"])
def test_an_oversized_body_is_one_line_without_a_traceback(console, settings, path):
    body = b"x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)

    for _ in range(3):
        response = Client().post(path, body, content_type="application/x-www-form-urlencoded")
        assert response.status_code in (400, 401, 403, 413)

    lines = console.getvalue().splitlines()
    assert "Traceback" not in console.getvalue()
    assert len(lines) <= 3


def test_a_database_outage_is_one_line_however_many_requests_it_refuses(console, monkeypatch):
    monkeypatch.setattr(logs, "OUTAGE_GAP_SECONDS", 60.0)
    [handler] = [
        h
        for h in logging.getLogger().handlers
        if any(isinstance(f, logs.RefusalFilter) for f in h.filters)
    ]
    [refusals] = [f for f in handler.filters if isinstance(f, logs.RefusalFilter)]
    monkeypatch.setattr(refusals, "_last_503", float("-inf"))
    request = RequestFactory().get("/api/sessions")

    for _ in range(50):
        try:
            raise OperationalError("connection refused")
        except OperationalError as error:
            log_response(
                "%s: %s",
                "Service Unavailable",
                request.path,
                response=HttpResponse(status=503),
                request=request,
                exception=error,
            )

    lines = console.getvalue().splitlines()
    assert len(lines) == 1
    assert "the database is away" in lines[0] and "OperationalError" in lines[0]
    assert "Traceback" not in console.getvalue()


def test_a_queue_outage_warns_once_and_once_more_when_it_is_back(caplog):
    outage = OutageLog(logging.getLogger("tests.outage"), "the task queue")

    with caplog.at_level(logging.DEBUG, logger="tests.outage"):
        for _ in range(140):
            outage.failed(ConnectionError("Redis refused"), "turns stay queued")
        outage.answered()
        outage.answered()

    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage().split(" (")[0].split(" after")[0] for r in warnings] == [
        "the task queue is away",
        "the task queue is back",
    ]
    assert all(r.exc_info is None for r in caplog.records)


def test_with_the_queues_redis_gone_accepted_messages_log_one_line(settings, monkeypatch, caplog):
    import django_rq.settings
    from django.tasks import task_backends

    from gloveapp.turns.queue import tasks
    from tests.mcp_servers import free_port

    dead = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    monkeypatch.setitem(django_rq.settings.QUEUES, "default", {"URL": dead, "DB": 0})
    settings.TASKS = {
        "default": {
            "BACKEND": "gloveapp.turns.queue.rq_backend.TurnsRQBackend",
            "QUEUES": ["default"],
        }
    }
    monkeypatch.setattr(tasks, "QUEUE_OUTAGE", OutageLog(tasks.logger, "the task queue"))
    assert type(task_backends["default"]).__name__ == "TurnsRQBackend"

    with caplog.at_level(logging.INFO, logger="gloveapp.turns.queue.tasks"):
        refused = [tasks.enqueue_session(f"session-{n}") for n in range(20)]

    assert refused == [False] * 20
    records = [r for r in caplog.records if r.name == "gloveapp.turns.queue.tasks"]
    assert len(records) == 1
    assert records[0].getMessage().startswith("the task queue is away (ConnectionError")
    assert records[0].exc_info is None
