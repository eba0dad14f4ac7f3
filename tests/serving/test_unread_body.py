"""On `make serve-prod`'s granian, a request refused before its body was read (an oversized
body's 413, a 401) leaves the keep-alive connection usable: the next request on it is
served, and the refusal is one log line without a traceback."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.api import liveserver
from tests.healing.serve_prod import ServeProd

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]

LIMIT = 2_621_440  # DATA_UPLOAD_MAX_MEMORY_SIZE, Django's default
ROUNDS = 10


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[ServeProd, str]]:
    with ServeProd(http_workers=1, ws_workers=2, turn_workers=1) as served:
        yield served, liveserver.api_token(served.database_url, "heavy")


def _read_response(sock: socket.socket) -> tuple[str, dict[str, str]]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return "(connection closed)", {}
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {
        k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])
    }
    remaining = int(headers.get("content-length", "0")) - len(rest)
    while remaining > 0:
        chunk = sock.recv(min(65536, remaining))
        if not chunk:
            break
        remaining -= len(chunk)
    return lines[0], headers


def _next_request_served(port: int, *, headers: str, size: int) -> tuple[str, str]:
    """(the refused request's status line, the next request's) on one connection."""
    body = b'{"title": "' + b"x" * size + b'"}'
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            (
                f"POST /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode()
            + body
        )
        refused, _ = _read_response(sock)
        try:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            following, _ = _read_response(sock)
        except OSError as error:
            following = f"(dropped: {error})"
    return refused, following


def test_the_request_after_an_oversized_body_is_served(stack):
    served, token = stack
    answers = [
        _next_request_served(
            served.port, headers=f"Authorization: Token {token}\r\n", size=LIMIT + 100_000
        )
        for _ in range(ROUNDS)
    ]

    assert {refused.split(" ", 2)[1] for refused, _ in answers} == {"413"}
    assert [following for _, following in answers] == ["HTTP/1.1 200 OK"] * ROUNDS
    log = served.log_tail(200_000)
    assert "Traceback" not in log


def test_the_request_after_an_unread_refusal_is_served(stack):
    served, _ = stack
    answers = [_next_request_served(served.port, headers="", size=500_000) for _ in range(ROUNDS)]

    assert {refused.split(" ", 2)[1] for refused, _ in answers} == {"401"}
    assert [following for _, following in answers] == ["HTTP/1.1 200 OK"] * ROUNDS
