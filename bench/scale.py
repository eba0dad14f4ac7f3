"""Every user-facing path at two sizes, same run: a large database against a small one.

Issue 30: "ten million messages feel like ten thousand". Two PostgreSQL databases are built
(migrated once into a template, copied, then filled with `generate_series` in a handful of
INSERT ... SELECT statements, rows shaped like those a demo chat writes):

| | large (default) | small | --quick large | --quick small |
| --- | --- | --- | --- | --- |
| messages | ~10M (two sessions of 100,000) | ~100k (two of 1,000) | ~50k | ~5k |
| sessions / users | 1M / 10k (five users with 20,000 each) | 10k / 100 (five with 200) | 5k / 50 | 500 / 6 |
| turns, inbox items, approvals (open + decided), mesh deliveries, live events, idempotency keys | ~2.5M, 1M, 10k + 1M, 1M, 5M, 2M | a hundredth | a two-hundredth | a two-thousandth |

Each database gets its own HTTP server, the production one (`make serve-prod`'s granian WSGI
command line; `--workers`), and every path in PATHS is requested in turns, one size then the
other, so a noisy neighbour hits both alike: p50 and p95 per size, their ratio
(large / small), the response's size at each, and its statuses. The floor is `GET /healthz`
(the whole middleware, static JSON, no database) on the same servers. A path that times out or
fails is reported so, not dropped.

Prints one JSON document (bench/run_all.py's shape: `measures`, `goals`); `make bench` skips
it (it builds millions of rows): run it on its own.

    .venv/bin/python bench/scale.py [--quick] [--requests 10] [--workers 2]
        [--database-url postgres://postgres@127.0.0.1:5432/glove_scale] [--keep] [--reuse]
        [--only admin] [--sizes large=0.1,small=0.01]

`--keep` leaves both databases (and what the build printed, in bench/out/); `--reuse`
measures them again without building (after a code change that needs no migration),
`--only` measures the paths whose name contains the text, or one of the comma-separated
texts (and the floor).

Every value of every admin filter is measured too (read from the admin of the small database:
`admin_filter_paths`), and the usage page at each range it offers. `--sizes` sets the scale
factors (1.0 is the large shape: `large=0.1,small=0.01` is 1M messages against 100k).

To add a path: one `Path(...)` line in PATHS (a URL template over the FACTS the build
prints, and who asks: anon, customer (the heavy user's login), token (theirs), staff).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path as FilePath
from typing import Any
from urllib.parse import parse_qs, urlsplit

ROOT = FilePath(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.machine import machine  # noqa: E402
from bench.lib.report import goal, number, percentile  # noqa: E402

VENV_BIN = FilePath(sys.executable).parent
# The shapes at scale factor 1 (the large database); each size multiplies them.
SHAPE = {
    "users": 10_000,
    "sessions": 1_000_000,
    "heavy_users": 5,
    "heavy_sessions": 20_000,  # per heavy user
    "long_messages": 100_000,  # per long session (two, the first heavy user's)
    "inbox_items": 1_000_000,
    "approvals_open": 10_000,
    "approvals_decided": 1_000_000,
    "mesh_deliveries": 1_000_000,
    "live_events": 5_000_000,
    "idempotency_keys": 2_000_000,
    "task_results": 1_000_000,
    "budgets": 10_000,
    "budget_ledger": 1_000_000,
    "login_records": 1_000_000,  # django-axes' access log (half as many failures)
    "workspace_entries": 100_000,
    "notifications": 1_000_000,
}
SIZES = {"large": 1.0, "small": 0.01}
QUICK_SIZES = {"large": 0.005, "small": 0.0005}
# A one-screen view answers within this (issue 30's "Done when").
ONE_SCREEN_BYTES = 1_000_000
FLAT_RATIO = 1.5
REQUEST_TIMEOUT = 60.0


@dataclass(frozen=True)
class Path:
    name: str
    url: str  # a template over FACTS: {long}, {normal}, {approval}, {heavy}
    who: str  # anon | customer | token | staff | staff_token
    one_screen: bool = True  # judged by the 1 MB rule
    ok: tuple[str, ...] = ("200",)  # the statuses that are a right answer
    htmx: str = ""  # sent as htmx sends it: "request", or the target of a partial


PATHS = [
    Path("floor: GET /healthz", "/healthz", "anon"),
    Path("chat list /", "/", "customer"),
    Path("chat page, a long chat", "/sessions/{long}/", "customer"),
    Path("chat page, a normal chat", "/sessions/{normal}/", "customer"),
    Path("chat list /, a page half-way down", "/?cursor={chats_cursor}", "customer"),
    Path(
        "chat list /, a page half-way down (htmx)",
        "/?cursor={chats_cursor}",
        "customer",
        htmx="request",
    ),
    Path(
        "chat page, a long chat, its messages (htmx)",
        "/sessions/{long}/",
        "customer",
        htmx="messages",
    ),
    Path("GET /api/sessions", "/api/sessions", "token"),
    Path("chat page, earlier messages", "/sessions/{long}/history?before=500", "customer"),
    Path("GET /api/sessions?limit=100", "/api/sessions?limit=100", "token"),
    Path(
        "GET /api/sessions?limit=100, a page half-way down",
        "/api/sessions?limit=100&cursor={sessions_cursor}",
        "token",
    ),
    Path("GET /api/sessions/<id>, a long chat", "/api/sessions/{long}", "token"),
    Path("GET …/timeline, a long chat", "/api/sessions/{long}/timeline", "token"),
    Path("GET …/tokens, a long chat", "/api/sessions/{long}/tokens", "token"),
    Path("GET …/turns, a long chat", "/api/sessions/{long}/turns", "token"),
    Path("GET …/tasks, a long chat", "/api/sessions/{long}/tasks", "token"),
    Path("GET …/slots, a long chat", "/api/sessions/{long}/slots", "token"),
    Path(
        "GET …/agent/turns/<id>, a long chat's newest turn",
        "/api/sessions/{long}/agent/turns/{turn}",
        "token",
    ),
    # No compaction in the built chats: the whole history, so capped like the unpaged GET.
    Path(
        "GET …/messages?since_compaction=1, a long chat",
        "/api/sessions/{long}/messages?since_compaction=1",
        "token",
        False,
        ("200", "400"),
    ),
    # Glove's unpaged GET: capped (GLOVE_HISTORY_UNPAGED_MAX), a 400 past the cap.
    Path(
        "GET …/messages, a long chat, unpaged",
        "/api/sessions/{long}/messages",
        "token",
        False,
        ("200", "400"),
    ),
    Path(
        "GET …/messages, a long chat, newest page",
        "/api/sessions/{long}/messages?limit=100",
        "token",
    ),
    Path(
        "GET …/messages, a long chat, a page in the middle",
        "/api/sessions/{long}/messages?limit=100&before=500",
        "token",
    ),
    Path("GET …/messages, a normal chat", "/api/sessions/{normal}/messages", "token"),
    Path("GET …/inbox, a long chat", "/api/sessions/{long}/inbox", "token"),
    Path(
        "GET …/inbox, a long chat, consumed items",
        "/api/sessions/{long}/inbox?status=consumed&limit=100",
        "token",
    ),
    Path(
        "GET …/inbox, a long chat, consumed items half-way down",
        "/api/sessions/{long}/inbox?status=consumed&limit=100&cursor={consumed_cursor}",
        "token",
    ),
    Path("/approvals/", "/approvals/", "staff"),
    Path("GET /api/approvals/", "/api/approvals/", "staff_token"),
    Path("GET /api/approvals/?status=decided", "/api/approvals/?status=decided", "staff_token"),
    Path(
        "GET /api/approvals/?status=decided, a page half-way down",
        "/api/approvals/?status=decided&cursor={decided_cursor}",
        "staff_token",
    ),
    # The admin: every changelist, plain, searched and filtered.
    Path("admin sessions", "/admin/conversations/session/", "staff"),
    Path("admin sessions, searched", "/admin/conversations/session/?q=Espresso", "staff"),
    Path("admin sessions, by owner", "/admin/conversations/session/?q={heavy}", "staff"),
    Path("admin sessions, filtered", "/admin/conversations/session/?agent=coffee", "staff"),
    Path("admin session page, a long chat", "/admin/conversations/session/{long}/change/", "staff"),
    Path("admin messages", "/admin/conversations/message/", "staff"),
    Path("admin messages, one chat", "/admin/conversations/message/?session={long}", "staff"),
    Path("admin messages, searched", "/admin/conversations/message/?q={long}", "staff"),
    Path("admin turns", "/admin/turns/turn/", "staff"),
    Path("admin turns, searched", "/admin/turns/turn/?q={long}", "staff"),
    Path("admin turns, filtered", "/admin/turns/turn/?status__exact=done", "staff"),
    Path("admin turns, one chat", "/admin/turns/turn/?session={long}", "staff"),
    Path("admin turn page, a long chat's newest", "/admin/turns/turn/{turn}/change/", "staff"),
    Path("admin live events", "/admin/live/liveevent/", "staff"),
    Path("admin live events, searched", "/admin/live/liveevent/?q=session:{long}", "staff"),
    Path("admin inbox items", "/admin/inbox/inboxitem/", "staff"),
    Path("admin inbox items, searched", "/admin/inbox/inboxitem/?q=restocked", "staff"),
    Path(
        "admin inbox items, filtered",
        "/admin/inbox/inboxitem/?status__exact=pending&session__id__exact={long}",
        "staff",
    ),
    Path("admin mesh traffic", "/admin/mesh/meshtraffic/", "staff"),
    Path("admin mesh traffic, filtered", "/admin/mesh/meshtraffic/?sender=roastery", "staff"),
    Path("admin mesh agents", "/admin/mesh/meshagent/", "staff"),
    Path("admin mesh deliveries", "/admin/mesh/meshdelivery/", "staff"),
    Path("admin mesh deliveries, filtered", "/admin/mesh/meshdelivery/?recipient=shop", "staff"),
    Path("admin approvals", "/admin/approvals/approvalrequest/", "staff"),
    Path("admin approvals, searched", "/admin/approvals/approvalrequest/?q={long}", "staff"),
    Path(
        "admin approvals, filtered", "/admin/approvals/approvalrequest/?status__exact=open", "staff"
    ),
    Path("admin decisions", "/admin/approvals/approvaldecision/", "staff"),
    Path("admin decisions, searched", "/admin/approvals/approvaldecision/?q=staff", "staff"),
    Path("admin users", "/admin/auth/user/", "staff"),
    Path("admin users, searched", "/admin/auth/user/?q=heavy1", "staff"),
    Path("admin mesh traffic, one recipient", "/admin/mesh/meshtraffic/?q=inbox_10", "staff"),
    Path("admin task results", "/admin/django_tasks_database/dbtaskresult/", "staff"),
    Path(
        "admin task results, facets asked for",
        "/admin/django_tasks_database/dbtaskresult/?_facets=1",
        "staff",
    ),
    Path(
        "admin task results, a deep page",
        "/admin/django_tasks_database/dbtaskresult/?p=5000",
        "staff",
        ok=("200", "302"),
    ),
    Path("admin API tokens", "/admin/authtoken/tokenproxy/", "staff"),
    Path("admin API tokens, searched", "/admin/authtoken/tokenproxy/?q={heavy}", "staff"),
    Path("admin API token page", "/admin/authtoken/tokenproxy/{heavy_id}/change/", "staff"),
    Path("admin live event page", "/admin/live/liveevent/{event_key}/change/", "staff"),
    # The usage page, every range it offers (`turns.admin.usage_page`'s day_choices).
    *(
        Path(f"admin usage, {days} days", f"/admin/usage/?days={days}", "staff")
        for days in (7, 14, 30, 90)
    ),
]


def admin_filter_paths() -> list[tuple[str, str]]:
    """Every value of every filter of every changelist (a typed value for the exact-value
    ones, from the build's facts), read from the admin as staff see it: a child process,
    Django set up on a built database."""
    import django

    django.setup()
    from django.contrib import admin
    from django.contrib.admin.templatetags.admin_list import result_headers
    from django.contrib.auth import get_user_model
    from django.test import RequestFactory

    staff = get_user_model().objects.get(username="staff")
    typed = {
        "session": "{long}",
        "session__id__exact": "{long}",
        "type": "message.appended",
        "sender": "roastery",
        "recipient": "shop",
        "tool_name": "checkout",
        "queue_name": "mesh",
        "workspace__id__exact": "w1",
        "budget_key": "user:1",
        "turn_id": "{turn}",
        "budget": "b1",
        "turn": "{turn}",
    }
    found = []
    for model, model_admin in sorted(admin.site._registry.items(), key=lambda i: i[0]._meta.label):
        url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        request = RequestFactory().get(url)
        request.user = staff
        try:
            changelist = model_admin.get_changelist_instance(request)
        except Exception:
            continue
        # Every sortable column, each way (`?o=2`, `?o=-2`: the column's number in the
        # admin's own link).
        columns = set()
        for header in result_headers(changelist):
            if header.get("sortable"):
                first = parse_qs(urlsplit(header["url_primary"]).query).get("o", [""])[0]
                columns.add(first.split(".")[0].lstrip("-"))
        for column in sorted(c for c in columns if c.isdigit()):
            for order in (column, f"-{column}"):
                found.append((f"admin sort {url}?o={order}", f"{url}?o={order}"))
        for spec in changelist.filter_specs:
            parameter = getattr(spec, "parameter_name", None)
            if spec.template.endswith("exact_value_filter.html"):
                found.append(
                    (f"{url}?{parameter}=…", f"{url}?{parameter}={typed.get(parameter, 'x')}")
                )
                continue
            for choice in spec.choices(changelist):
                query = choice.get("query_string", "")
                if query and query != "?" and not choice.get("selected"):
                    found.append((f"{url}{query}", f"{url}{query}"))
    return found


def admin_change_pages() -> dict[str, str]:
    """Each changelist's first row's change page, linked as the admin links it, in this
    process's database (keys differ between the sizes: read in each), as facts
    `change_<app>_<model>`."""
    import django

    django.setup()
    from django.contrib import admin
    from django.contrib.auth import get_user_model
    from django.test import RequestFactory

    staff = get_user_model().objects.get(username="staff")
    pages = {}
    for model, model_admin in admin.site._registry.items():
        opts = model._meta
        request = RequestFactory().get(f"/admin/{opts.app_label}/{opts.model_name}/")
        request.user = staff
        try:
            changelist = model_admin.get_changelist_instance(request)
        except Exception:
            continue
        first = changelist.result_list[:1]
        if first:
            pages[f"change_{opts.app_label}_{opts.model_name}"] = changelist.url_for_result(
                first[0]
            )
    return pages


def log(text: str) -> None:
    print(f"[scale] {text}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def psql(url: str, sql: str) -> str:
    done = subprocess.run(["psql", url, "-qAtc", sql], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"psql failed: {done.stderr}")
    return done.stdout


# -- the build (a child process per database, Django set up on it) -----------------------------
def build(factor: float) -> dict[str, Any]:
    """Fill this process's (migrated, empty) database at `factor` of SHAPE; return FACTS."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection

    from bench.lib.scale_build import fill

    started = time.monotonic()
    counts = fill(connection, {name: max(1, int(value * factor)) for name, value in SHAPE.items()})
    # The usage page's 90 days, summed as a worker's scheduler does (timed: its bound is a
    # day's steps, in the background).
    from gloveapp.turns.usage_rollup import MAX_DAYS, usage_rollup

    summing = time.monotonic()
    usage_rollup(days=MAX_DAYS)
    counts["usage_rollup_90_days_seconds"] = round(time.monotonic() - summing, 1)
    User = get_user_model()
    heavy = User.objects.get(username="heavy1")
    heavy.set_password(secrets.token_hex(8))
    heavy.save(update_fields=["password"])
    staff = User.objects.create_superuser("staff", "staff@example.com", secrets.token_hex(8))
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE)")
    return {
        **counts,
        "build_seconds": round(time.monotonic() - started, 1),
        "customer_cookie": _login_cookie(heavy),
        "staff_cookie": _login_cookie(staff),
        "token": _token(heavy),
        "staff_token": _token(staff),
        "heavy": heavy.username,
        **deep_cursors(heavy),
    }


def deep_cursors(heavy: Any) -> dict[str, Any]:
    """Where the paged lists' pages half-way down start (the cursors they hand out), and the
    long chat's newest turn: a page deep in a list must cost what its first page costs."""
    from gloveapp.api.store.inbox import CONSUMED_LISTED
    from gloveapp.api.store.sessions import SESSIONS_LISTED
    from gloveapp.api.webhooks.approvals import APPROVALS_LISTED
    from gloveapp.approvals.models import ApprovalRequest
    from gloveapp.conversations.models import Session
    from gloveapp.lib.paging import Cursor
    from gloveapp.live.admin import event_key
    from gloveapp.live.models import LiveEvent
    from gloveapp.pages.views import CHATS_LISTED
    from gloveapp.turns.models import Turn
    from inbox.models import InboxItem

    def half_way(rows: Any, tie: str, listed: str) -> str:
        middle = rows.count() // 2
        row = rows[middle]
        return Cursor(at=row.created_at, tie=str(getattr(row, tie))).encode(listed)

    sessions = Session.objects.filter(owner=heavy, parent__isnull=True)
    return {
        "sessions_cursor": half_way(
            sessions.order_by("-created_at", "-key"), "key", SESSIONS_LISTED
        ),
        "chats_cursor": half_way(sessions.order_by("-created_at", "-key"), "key", CHATS_LISTED),
        "decided_cursor": half_way(
            ApprovalRequest.objects.filter(status="decided").order_by("created_at", "id"),
            "id",
            APPROVALS_LISTED,
        ),
        "consumed_cursor": half_way(
            InboxItem.objects.filter(session_id="s1", status="consumed").order_by(
                "-created_at", "-key"
            ),
            "key",
            CONSUMED_LISTED,
        ),
        "turn": Turn.objects.filter(session_id="s1")
        .order_by("-id")
        .values_list("id", flat=True)[0],
        "heavy_id": heavy.pk,
        "event_key": event_key(LiveEvent.objects.order_by("-id")[0]),
    }


def logins() -> dict[str, str]:
    """New logins and the tokens of the heavy user and staff, in this process's database
    (and the deep pages' cursors, for a database a run before this one built)."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    User = get_user_model()
    heavy, staff = User.objects.get(username="heavy1"), User.objects.get(username="staff")
    return {
        "customer_cookie": _login_cookie(heavy),
        "staff_cookie": _login_cookie(staff),
        "token": _token(heavy),
        "staff_token": _token(staff),
        **deep_cursors(heavy),
    }


def _login_cookie(user: Any) -> str:
    from importlib import import_module

    from django.conf import settings

    store = import_module(settings.SESSION_ENGINE).SessionStore()
    store["_auth_user_id"] = str(user.pk)
    store["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
    store["_auth_user_hash"] = user.get_session_auth_hash()
    store.save()
    return store.session_key


def _token(user: Any) -> str:
    from rest_framework.authtoken.models import Token

    return Token.objects.get_or_create(user=user)[0].key


# -- the measure ------------------------------------------------------------------------------
class Databases:
    def __init__(self, url: str, sizes: dict[str, float]) -> None:
        base, _, name = url.rpartition("/")
        self.admin_url = f"{base}/postgres"
        self.base, self.name, self.sizes = base, name, sizes
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "gloveapp.settings",
            "DEBUG": "0",
            "SECRET_KEY": secrets.token_hex(32),
            "GLOVE_MODEL": "",
            "PYTHONUNBUFFERED": "1",
            "REDIS_URL": "",
            "DB_POOL_SIZE": "0",
            "GLOVE_DB_STATEMENT_TIMEOUT_SECONDS": "0",  # the build runs long on purpose
        }
        self.env.pop("DB_CONN_MAX_AGE", None)

    def url(self, size: str) -> str:
        return f"{self.base}/{self.name}_{size}"

    def ask(self, size: str, flag: str) -> Any:
        """This script run as a child on one size's database with `flag` (Django set up
        there): the JSON its last line prints."""
        done = subprocess.run(
            [sys.executable, __file__, flag],
            cwd=ROOT,
            env={**self.env, "DATABASE_URL": self.url(size)},
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(done.stdout.strip().splitlines()[-1])

    def drop(self) -> None:
        for db in [f"{self.name}_template", *(f"{self.name}_{size}" for size in self.sizes)]:
            psql(self.admin_url, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')

    def build_all(self) -> dict[str, dict]:
        self.drop()
        template = f"{self.name}_template"
        psql(self.admin_url, f'CREATE DATABASE "{template}"')
        started = time.monotonic()
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=ROOT,
            env={**self.env, "DATABASE_URL": f"{self.base}/{template}"},
            check=True,
            capture_output=True,
        )
        log(f"migrated the template in {time.monotonic() - started:.1f} s")
        facts = {}
        for size in self.sizes:
            psql(self.admin_url, f'CREATE DATABASE "{self.name}_{size}" TEMPLATE "{template}"')
        children = {
            size: subprocess.Popen(
                [sys.executable, __file__, "--build", str(factor)],
                cwd=ROOT,
                env={**self.env, "DATABASE_URL": self.url(size)},
                stdout=subprocess.PIPE,
                text=True,
            )
            for size, factor in self.sizes.items()
        }
        for size, child in children.items():
            out, _ = child.communicate()
            if child.returncode != 0:
                raise RuntimeError(f"building the {size} database failed")
            facts[size] = json.loads(out.strip().splitlines()[-1])
            log(
                f"built {size}: {facts[size]['messages']:,} messages in {facts[size]['build_seconds']} s"
            )
        psql(self.admin_url, f'DROP DATABASE IF EXISTS "{template}"')
        return facts


def start_server(env: dict, workers: int, log_file: Any) -> tuple[subprocess.Popen, str]:
    """The HTTP server of `make serve-prod` (.ci/serve_prod.py's granian command line)."""
    port = free_port()
    command = [
        str(VENV_BIN / "granian"),
        "--interface",
        "wsgi",
        "gloveapp.wsgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--blocking-threads",
        "6",
        "--no-ws",
        "--log-level",
        "warning",
    ]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    import httpx

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("the server exited early")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    stop(process)
    raise RuntimeError("the server did not come up")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def client_for(url: str, who: str, facts: dict, htmx: str = "") -> Any:
    import httpx

    cookies, headers = {}, {}
    if who == "customer":
        cookies["sessionid"] = facts["customer_cookie"]
    elif who == "staff":
        cookies["sessionid"] = facts["staff_cookie"]
    elif who == "token":
        headers["Authorization"] = f"Token {facts['token']}"
    elif who == "staff_token":
        headers["Authorization"] = f"Token {facts['staff_token']}"
    if htmx:
        headers["HX-Request"] = "true"
        if htmx != "request":
            headers["HX-Target"] = htmx
    return httpx.Client(base_url=url, cookies=cookies, headers=headers, timeout=REQUEST_TIMEOUT)


def measure(
    servers: dict[str, str],
    facts: dict[str, dict],
    requests: int,
    path_seconds: float,
    paths: list[Path],
) -> list[dict]:
    import httpx

    rows = []
    for path in paths:
        samples: dict[str, list[float]] = {size: [] for size in servers}
        sizes: dict[str, int] = {}
        statuses: dict[str, dict[str, int]] = {size: {} for size in servers}
        clients = {
            size: client_for(url, path.who, facts[size], path.htmx) for size, url in servers.items()
        }
        urls = {size: path.url.format(**facts[size]) for size in servers}
        given_up: set[str] = set()
        started = time.monotonic()
        for _ in range(requests):
            for size in servers:
                if size in given_up:
                    continue
                began = time.perf_counter()
                try:
                    response = clients[size].get(urls[size])
                    status = str(response.status_code)
                    sizes[size] = len(response.content)
                except httpx.TimeoutException:
                    status = "timeout"
                    given_up.add(size)
                samples[size].append(time.perf_counter() - began)
                statuses[size][status] = statuses[size].get(status, 0) + 1
            if time.monotonic() - started > path_seconds:
                break
        for client in clients.values():
            client.close()
        row: dict[str, Any] = {"measure": path.name, "url": path.url}
        for size in servers:
            row[f"{size}_p50_ms"] = round(percentile(samples[size], 0.5) * 1000, 1)
            row[f"{size}_p95_ms"] = round(percentile(samples[size], 0.95) * 1000, 1)
            row[f"{size}_bytes"] = sizes.get(size)
            row[f"{size}_statuses"] = statuses[size]
            row[f"{size}_requests"] = len(samples[size])
        small = max(row["small_p50_ms"], 0.1)
        row["ratio_p50"] = round(row["large_p50_ms"] / small, 2)
        row["one_screen"] = path.one_screen
        rows.append(row)
        log(
            f"{path.name}: {row['small_p50_ms']} ms -> {row['large_p50_ms']} ms "
            f"(x{row['ratio_p50']}), {row.get('large_bytes')} bytes, {statuses['large']}"
        )
    return rows


def judge(rows: list[dict]) -> list[dict]:
    floor = next(r for r in rows if r["measure"].startswith("floor"))
    slow = [
        r
        for r in rows
        if r is not floor
        and r["one_screen"]
        # Within 1.5x, or within a millisecond of it on a path that costs a few (noise).
        and r["ratio_p50"] > FLAT_RATIO
        and r["large_p50_ms"] - FLAT_RATIO * r["small_p50_ms"] > 1.0
    ]
    # A whole history (Glove's unpaged read) grows with the chat by its contract: its time
    # per byte, not its time, is what must not grow.
    whole = [
        r for r in rows if not r["one_screen"] and r.get("large_bytes") and r.get("small_bytes")
    ]
    per_byte = {
        r["measure"]: (r["large_p50_ms"] / r["large_bytes"])
        / (r["small_p50_ms"] / r["small_bytes"])
        for r in whole
    }
    costly = [name for name, ratio in per_byte.items() if ratio > FLAT_RATIO]
    screens = [r for r in rows if r is not floor and r["one_screen"]]
    oks = {path.name: set(path.ok) for path in PATHS}
    failing = [r for r in rows if set(r["large_statuses"]) - oks.get(r["measure"], {"200"})]
    big = [r for r in rows if r["one_screen"] and (r.get("large_bytes") or 0) > ONE_SCREEN_BYTES]
    return [
        goal(
            30,
            f"every one-screen path at the large size within {FLAT_RATIO}x of its time at the "
            "small one",
            f"{len(screens) - len(slow)} of {len(screens)} paths"
            + (f"; not: {', '.join(r['measure'] for r in slow)}" if slow else ""),
            not slow,
        ),
        goal(
            39,
            f"a whole history's time per byte at the large size within {FLAT_RATIO}x of the "
            "small one's",
            ", ".join(f"{name}: {ratio:.2f}x" for name, ratio in per_byte.items()) or "none",
            not costly,
        ),
        goal(
            30,
            "every path answers rightly at the large size (200; 400 for a capped unpaged read)",
            f"{len(rows) - len(failing)} of {len(rows)}"
            + (f"; not: {', '.join(r['measure'] for r in failing)}" if failing else ""),
            not failing,
        ),
        goal(
            30,
            "no one-screen view over 1 MB",
            f"{len(big)} over"
            + (
                f": {', '.join(r['measure'] + ' ' + number(r['large_bytes'], 0) + ' B' for r in big)}"
                if big
                else ""
            ),
            not big,
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes for a test: 50k / 5k messages")
    parser.add_argument("--requests", type=int, default=None, help="per path and size")
    parser.add_argument("--path-seconds", type=float, default=120.0, help="cap per path")
    parser.add_argument("--workers", type=int, default=2, help="granian workers per server")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_SCALE_DATABASE_URL")
        or "postgres://postgres@127.0.0.1:5432/glove_scale",
        help="its name is a prefix: <name>_large, <name>_small (dropped and made anew)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the databases (and their facts) afterwards"
    )
    parser.add_argument(
        "--reuse", action="store_true", help="measure the databases a --keep run left"
    )
    parser.add_argument(
        "--only", default="", help="measure only the paths whose name has this (a,b: either)"
    )
    parser.add_argument("--build", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--logins", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--admin-filters", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--admin-pages", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--sizes",
        default="",
        help="scale factors instead of the defaults, e.g. large=0.1,small=0.01 (1M / 100k)",
    )
    args = parser.parse_args()
    if args.build is not None:
        print(json.dumps(build(args.build)))
        return 0
    if args.logins:
        print(json.dumps(logins()))
        return 0
    if args.admin_filters:
        print(json.dumps(admin_filter_paths()))
        return 0
    if args.admin_pages:
        print(json.dumps(admin_change_pages()))
        return 0

    sizes = QUICK_SIZES if args.quick else SIZES
    if args.sizes:
        sizes = {k: float(v) for k, v in (part.split("=") for part in args.sizes.split(","))}
    requests = args.requests or (3 if args.quick else 10)
    databases = Databases(args.database_url, sizes)
    began = time.monotonic()
    kept = ROOT / "bench" / "out" / f"scale-{databases.name}.json"
    if args.reuse:
        facts = json.loads(kept.read_text())
        # Logins signed with this run's key (a login is signed with the server's key).
        for size in sizes:
            facts[size].update(databases.ask(size, "--logins"))
    else:
        facts = databases.build_all()
    if args.keep:
        kept.parent.mkdir(exist_ok=True)
        kept.write_text(json.dumps(facts))
    servers: dict[str, str] = {}
    processes = []
    log_path = FilePath(os.environ.get("TMPDIR", "/tmp")) / "glove-bench-scale-server.log"
    with open(log_path, "wb") as log_file:
        try:
            for size in sizes:
                env = {**databases.env, "DATABASE_URL": databases.url(size)}
                # The servers run as in production: their own statement bound and pool.
                for name in ("GLOVE_DB_STATEMENT_TIMEOUT_SECONDS", "DB_POOL_SIZE"):
                    env.pop(name, None)
                process, url = start_server(env, args.workers, log_file)
                processes.append(process)
                servers[size] = url
            wanted = [text for text in args.only.split(",") if text] or [""]
            filters = [
                Path(
                    name if name.startswith("admin sort") else f"admin filter {name}", url, "staff"
                )
                for name, url in databases.ask("small", "--admin-filters")
            ]
            # Every changelist's first row's page, read in each database (keys differ).
            pages: dict[str, str] = {}
            for size in sizes:
                found = databases.ask(size, "--admin-pages")
                facts[size].update(found)
                pages.update(found)
            filters += [
                Path(f"admin change page {key.removeprefix('change_')}", f"{{{key}}}", "staff")
                for key in sorted(pages)
                if all(key in facts[size] for size in sizes)
            ]
            paths = [
                p
                for p in PATHS + filters
                if any(text in p.name for text in wanted) or p.name.startswith("floor")
            ]
            rows = measure(servers, facts, requests, args.path_seconds, paths)
        finally:
            for process in processes:
                stop(process)
            if not (args.keep or args.reuse):
                databases.drop()
    document = {
        "bench": "scale",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "config": {
            "quick": args.quick,
            "requests_per_path": requests,
            "workers": args.workers,
            "sizes": {
                size: {k: v for k, v in facts[size].items() if not k.endswith(("cookie", "token"))}
                for size in sizes
            },
            "seconds": round(time.monotonic() - began, 1),
        },
        "measures": rows,
        "goals": judge(rows),
    }
    print(json.dumps(document, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
