"""The hostile sweep over HTTP: every route of the OpenAPI schema and every page, bent every
way a hostile caller bends a request, on a real server (Daphne as `make run` serves, or
`make serve-prod`'s granian behind its topology). Counts the answers by status, every 5xx,
and every dropped connection (all requests share keep-alive connections, so a server that
drops one after a refusal shows here).

    .venv/bin/python bench/hostile_sweep.py --server daphne
    .venv/bin/python bench/hostile_sweep.py --server serve-prod
    .venv/bin/python bench/hostile_sweep.py --server both --json bench/hostile_sweep.json

Floor: no 5xx and 0 dropped connections (the exit status is 1 otherwise). Each server gets
its own SQLite database in a temporary folder.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.api.liveserver import LiveServer  # noqa: E402
from tests.healing.serve_prod import ServeProd  # noqa: E402

PASSWORD = "pw-sweeper-123456"
LIMIT = 2_621_440  # DATA_UPLOAD_MAX_MEMORY_SIZE
HOSTILE_STRINGS = [
    "\ud800",  # a lone surrogate (sent escaped in JSON: "\\ud800")
    "\x00nul",
    "x" * 70_000,
    '=HYPERLINK("https://evil.example")',
    "```<https://evil.example|Approve here>```",
    "../../etc/passwd",
    "ü" * 300,
    "",
]
HOSTILE_PATH_VALUES = ["x" * 5000, "%00", "%ff", "..%2F..%2Fetc", "nope", "0", "-1", "9" * 40]
DEEP = "[" * 20_000 + "]" * 20_000


def _fill(schema: dict[str, Any], root: dict[str, Any], value: Any, depth: int = 0) -> Any:
    """A body of the schema's shape with `value` in every string."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
        schema = root["components"]["schemas"].get(ref.rsplit("/", 1)[-1], {})
    if depth > 6:
        return value
    kind = schema.get("type")
    if "properties" in schema or kind == "object":
        return {
            name: _fill(sub, root, value, depth + 1)
            for name, sub in (schema.get("properties") or {}).items()
        }
    if kind == "array":
        return [_fill(schema.get("items") or {}, root, value, depth + 1), None]
    if kind == "integer":
        return 2**70
    if kind == "number":
        return 1e308
    if kind == "boolean":
        return "yes"
    for union in ("oneOf", "anyOf", "allOf"):
        if schema.get(union):
            return _fill(schema[union][0], root, value, depth + 1)
    return value


def _bodies(operation: dict[str, Any], root: dict[str, Any]) -> Iterator[tuple[str, bytes, str]]:
    """(label, raw body, content type) of each hostile body for the operation."""
    content = ((operation.get("requestBody") or {}).get("content")) or {}
    schema = (content.get("application/json") or {}).get("schema") or {}
    yield "empty", b"", "application/json"
    yield "not json", b"{not json", "application/json"
    yield "deep", DEEP.encode(), "application/json"
    yield "oversized", b'{"x":"' + b"a" * (LIMIT + 10_000) + b'"}', "application/json"
    yield "form", b"a=%ff&b=\x00", "application/x-www-form-urlencoded"
    for value in HOSTILE_STRINGS:
        body = json.dumps(_fill(schema, root, value))  # ensure_ascii: "\\ud800" stays text
        yield f"fill {value[:12]!r}", body.encode(), "application/json"


def _paths(template: str, session: str, values: list[str]) -> Iterator[str]:
    names = re.findall(r"{([^}]+)}", template)
    if not names:
        yield template
        return
    for value in [session, *values]:
        path = template
        for name in names:
            path = path.replace("{" + name + "}", value)
        yield path


PAGES = [
    "/",
    "/sessions/new",
    "/sessions/{session}/",
    "/sessions/{session}/messages",
    "/sessions/{session}/slots/{x}",
    "/sessions/{session}/cancel",
    "/sessions/{session}/tool-results/{x}",
    "/inbox/",
    "/approvals/",
    "/approvals/link/{x}",
    "/approvals/{x}",
    "/notifications/",
    "/accounts/tokens/",
    "/accounts/tokens/revoke",
    "/accounts/login/",
    "/accounts/logout/",
    "/admin/",
    "/admin/approvals/approvaldecision/",
    "/healthz",
    "/api/",
    "/api/docs/",
]


class Sweep:
    def __init__(self, url: str) -> None:
        self.url = url
        self.statuses: Counter[int] = Counter()
        self.errors: list[str] = []
        self.dropped: list[str] = []
        self.requests = 0

    def send(self, client: httpx.Client, method: str, path: str, **kwargs: Any) -> None:
        self.requests += 1
        try:
            response = client.request(method, path, **kwargs)
        except (
            httpx.RemoteProtocolError,
            httpx.ReadError,
            httpx.WriteError,
            httpx.ConnectError,
        ) as error:
            self.dropped.append(f"{method} {path[:120]}: {type(error).__name__}: {error}")
            return
        except httpx.TimeoutException as error:
            self.dropped.append(f"{method} {path[:120]}: timeout {error}")
            return
        self.statuses[response.status_code] += 1
        if response.status_code >= 500:
            self.errors.append(f"{method} {path[:120]} -> {response.status_code}")

    def run(self, *, token: str, cookie: str, csrf: str, session: str) -> None:
        limits = httpx.Limits(max_connections=2, max_keepalive_connections=2)
        with httpx.Client(base_url=self.url, timeout=60, limits=limits) as plain:
            schema = plain.get("/api/schema/", headers={"Accept": "application/json"}).json()
        callers = {
            "token": {"Authorization": f"Token {token}"},
            "anonymous": {},
            "session": {
                "Cookie": cookie,
                "X-CSRFToken": csrf,
                "Origin": self.url,
                "Referer": self.url + "/",
            },
            "forged signature": {
                "X-Glove-Timestamp": str(int(time.time())),
                "X-Glove-Signature": "sha256=" + "0" * 64,
            },
        }
        for caller, headers in callers.items():
            with httpx.Client(
                base_url=self.url, timeout=60, headers=headers, limits=limits
            ) as client:
                for template, operations in schema["paths"].items():
                    for method, operation in operations.items():
                        if method not in ("get", "post", "put", "patch", "delete"):
                            continue
                        # Every hostile path value for the token holder; the others once.
                        values = HOSTILE_PATH_VALUES if caller == "token" else []
                        for path in _paths(template, session, values):
                            if method == "get":
                                self.send(
                                    client,
                                    "GET",
                                    path,
                                    params={
                                        "limit": "-1",
                                        "before": "x" * 300,
                                        "after": "\x00",
                                        "cursor": "%ff",
                                    },
                                )
                                continue
                            for _, body, kind in _bodies(operation, schema):
                                if caller != "token" and len(body) > LIMIT:
                                    continue  # the oversized body: once per route is plenty
                                self.send(
                                    client,
                                    method.upper(),
                                    path,
                                    content=body,
                                    headers={"Content-Type": kind},
                                )
                for page in PAGES:
                    for path in _paths(
                        page.replace("{x}", "{session}"), session, HOSTILE_PATH_VALUES[:4]
                    ):
                        self.send(client, "GET", path, params={"q": "\x00", "request": "%ff"})
                        self.send(
                            client,
                            "POST",
                            path,
                            content=b"a=%ff&value=\x00&csrfmiddlewaretoken=x",
                            headers={"Content-Type": "application/x-www-form-urlencoded"},
                        )

    def summary(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "server_errors": len(self.errors),
            "dropped_connections": len(self.dropped),
            "first_server_errors": self.errors[:20],
            "first_dropped": self.dropped[:20],
        }


def _login(url: str) -> tuple[str, str]:
    with httpx.Client(base_url=url, timeout=30) as http:
        page = http.get("/accounts/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]
        http.post(
            "/accounts/login/",
            data={"username": "sweeper", "password": PASSWORD, "csrfmiddlewaretoken": csrf},
            headers={"Referer": f"{url}/accounts/login/"},
        )
        return (
            f"sessionid={http.cookies['sessionid']}; csrftoken={http.cookies['csrftoken']}",
            http.cookies["csrftoken"],
        )


def _manage(env: dict[str, str], *args: str) -> str:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout


def sweep(url: str, env: dict[str, str]) -> dict[str, Any]:
    _manage(
        env,
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model as g; "
        f"g().objects.create_user('sweeper', password='{PASSWORD}', is_staff=True)",
    )
    token = _manage(env, "create_api_token", "sweeper").strip().splitlines()[-1]
    cookie, csrf = _login(url)
    session = httpx.post(
        f"{url}/api/sessions", json={}, headers={"Authorization": f"Token {token}"}, timeout=30
    ).json()["sessionId"]
    run = Sweep(url)
    started = time.monotonic()
    run.run(token=token, cookie=cookie, csrf=csrf, session=session)
    return {**run.summary(), "seconds": round(time.monotonic() - started, 1)}


@contextlib.contextmanager
def served(kind: str) -> Iterator[tuple[str, dict[str, str]]]:
    if kind == "daphne":
        with LiveServer(server="daphne") as live:
            yield live.url, live.env
    else:
        with ServeProd(http_workers=2, ws_workers=2, turn_workers=1) as stack:
            _manage(stack.env, "migrate", "--noinput")
            yield stack.url, stack.env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=["daphne", "serve-prod", "both"], default="both")
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    kinds = ["daphne", "serve-prod"] if options.server == "both" else [options.server]
    results = {}
    for kind in kinds:
        with served(kind) as (url, env):
            results[kind] = sweep(url, env)
        print(kind, json.dumps(results[kind], indent=2), flush=True)
    if options.json:
        options.json.write_text(json.dumps(results, indent=2) + "\n")
    bad = any(r["server_errors"] or r["dropped_connections"] for r in results.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
