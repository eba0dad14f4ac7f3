"""Paged reads (issue 30): one person's views at 20 and at 20,000 chats, and a chat of
100,000 messages, on PostgreSQL.

Builds its own database (`--database-url`, dropped and created; default
`glove_bench_reads` on 127.0.0.1) with the project's migrations, then fills it with
`generate_series` in a few statements: a light user with 20 chats of 4 messages, a heavy
user with `--chats` chats of 4 messages (2 of them a person's) and one chat of
`--long-chat` messages. Each path is then asked `--requests` times through Django's test
client in this process (no HTTP server: the view, its queries and its rendering), and the
report gives p50 / p95 in ms, the response's size and its number of queries:

- `GET /` (the chat list's first page), light and heavy user;
- `GET /?cursor=...` (a page deep in the heavy user's list);
- `GET /sessions/<long>/` (the chat page of the long chat) and `/history?before=<seq>`;
- `GET /api/sessions` (heavy user), `GET /api/sessions/<long>/messages?limit=100` and
  `?before=50000&limit=100`, and the unpaged GET (capped: its 400).

`--tree /path/to/a/checkout` measures the same paths with another checkout's code (for
instance the `main` from before the paged reads) against the same database: its schema is
this tree's (extra columns the old code never reads). A path the old code does not have is
reported as such; every request of the old code runs under a statement timeout
(`--timeout`, 60 s) so an unanswerable one frees the database.

    .venv/bin/python bench/paged_reads.py
    .venv/bin/python bench/paged_reads.py --tree /work/main --requests 3   # "before"

Floor: none; the goal is the ratio heavy / light of the chat list (issue 30: the first page
costs the same at 20 and at 20,000 chats) and a long chat's page answering in one page's time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parents[1]


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/glove_bench_reads"
    )
    parser.add_argument("--chats", type=int, default=20_000)
    parser.add_argument("--long-chat", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--timeout", type=int, default=60, help="statement timeout, seconds")
    parser.add_argument("--tree", default=None, help="measure another checkout's code")
    parser.add_argument("--keep", action="store_true", help="reuse the database if built")
    return parser.parse_args()


ARGS = _parse()
TREE = Path(ARGS.tree).resolve() if ARGS.tree else HERE
sys.path.insert(0, str(TREE))
sys.path.insert(1, str(HERE))  # bench.lib, if the other tree lacks it


def _admin_url(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/postgres")), parts.path.lstrip("/")


def build_database() -> bool:
    """Create the database afresh (unless `--keep` finds it); True if it must be filled."""
    import psycopg

    admin, name = _admin_url(ARGS.database_url)
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists and ARGS.keep:
            return False
        if ARGS.tree:
            raise SystemExit("--tree measures a database built (and --keep) by this tree")
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return True


os.environ["DATABASE_URL"] = ARGS.database_url
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gloveapp.settings")
os.environ["GLOVE_TURNS_PER_USER_PER_MINUTE"] = "100000"
fill = build_database()

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

from bench.lib.report import goal, percentile  # noqa: E402

LONG = "long-chat"
# A user with a little more than one page of chats: the chat list's first page shows as many
# rows as the heavy user's, so the two differ only in what lies beyond the page.
MEDIUM = 60


def add_chats(user, chats: int) -> None:
    """`chats` chats of 4 messages (2 of them a person's) for `user`."""
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO conversations_session
                 (id, key, owner_id, title, agent_name, parent_call_id, token_count,
                  turn_count, tokens_in_total, tokens_out_total,
                  cache_creation_input_tokens_total, cache_read_input_tokens_total,
                  last_seq, person_message_count, created_at, updated_at)
               SELECT %s || '-' || n, 'c' || n, %s, 'Chat ' || n, 'coffee', '', 0, 0, 0,
                      0, 0, 0, 4, 2, now() - n * interval '1 minute', now()
                 FROM generate_series(1, %s) n""",
            [user.username, user.pk, chats],
        )
        cursor.execute(
            """INSERT INTO conversations_message
                 (session_id, seq, sender, text, is_compaction, is_skill_injection, wire,
                  created_at)
               SELECT s.id, k, CASE WHEN mod(k, 2) = 1 THEN 'user' ELSE 'agent' END,
                      'message ' || k, false, false,
                      json_build_object('sender', CASE WHEN mod(k, 2) = 1 THEN 'user'
                                        ELSE 'agent' END, 'text', 'message ' || k)::text,
                      now()
                 FROM conversations_session s, generate_series(1, 4) k
                WHERE s.owner_id = %s""",
            [user.pk],
        )


def fill_database() -> None:
    call_command("migrate", verbosity=0)
    users = get_user_model().objects
    heavy = users.create_user("heavy")
    for name, chats in (("light", 20), ("medium", MEDIUM), ("heavy", ARGS.chats)):
        add_chats(heavy if name == "heavy" else users.create_user(name), chats)
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO conversations_session
                 (id, key, owner_id, title, agent_name, parent_call_id, token_count,
                  turn_count, tokens_in_total, tokens_out_total,
                  cache_creation_input_tokens_total, cache_read_input_tokens_total,
                  last_seq, person_message_count, created_at, updated_at)
               VALUES (%s, %s, %s, 'The long chat', 'coffee', '', 0, 0, 0, 0, 0, 0, %s, %s,
                       now(), now())""",
            [LONG, LONG, heavy.pk, ARGS.long_chat, (ARGS.long_chat + 1) // 2],
        )
        cursor.execute(
            """INSERT INTO conversations_message
                 (session_id, seq, sender, text, is_compaction, is_skill_injection, wire,
                  created_at)
               SELECT %s, k, CASE WHEN mod(k, 2) = 1 THEN 'user' ELSE 'agent' END,
                      'A longer message of the long chat, number ' || k, false, false,
                      json_build_object('sender', CASE WHEN mod(k, 2) = 1 THEN 'user'
                                        ELSE 'agent' END,
                                        'text', 'A longer message of the long chat, number '
                                                || k)::text,
                      now()
                 FROM generate_series(1, %s) k""",
            [LONG, ARGS.long_chat],
        )
        cursor.execute("VACUUM ANALYZE")


def measure(name: str, request, requests: int) -> dict:
    """`request()` `requests` times (after one untimed warm-up): p50/p95 ms, bytes, queries."""
    times = []
    status = size = queries = None
    try:
        response = request()
        status = response.status_code
        for _ in range(requests):
            with CaptureQueriesContext(connection) as captured:
                start = time.perf_counter()
                response = request()
                times.append((time.perf_counter() - start) * 1000)
            status, size, queries = response.status_code, len(response.content), len(captured)
    except Exception as exc:  # a statement timeout on the old code: reported, not fatal
        connection.close()
        return {"measure": name, "error": f"{type(exc).__name__}: {str(exc)[:120]}"}
    return {
        "measure": name,
        "status": status,
        "p50_ms": round(percentile(times, 0.5), 1),
        "p95_ms": round(percentile(times, 0.95), 1),
        "bytes": size,
        "queries": queries,
    }


def main() -> None:
    if fill:
        started = time.perf_counter()
        fill_database()
        print(f"built in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    with connection.cursor() as cursor:
        cursor.execute(f"SET statement_timeout = '{ARGS.timeout}s'")
    users = get_user_model().objects
    if not users.filter(username="medium").exists():  # a database built before it existed
        add_chats(users.create_user("medium"), MEDIUM)
    light, heavy = users.get(username="light"), users.get(username="heavy")
    page_light, page_medium, page_heavy = Client(), Client(), Client()
    page_light.force_login(light)
    page_medium.force_login(users.get(username="medium"))
    page_heavy.force_login(heavy)
    token = Token.objects.get_or_create(user=heavy)[0].key
    api = Client(HTTP_AUTHORIZATION=f"Token {token}")
    htmx = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "messages"}
    deep = None
    paths = page_heavy.get("/").content.decode()
    if "cursor=" in paths:  # this tree pages the list: a page 10,000 chats deep
        from gloveapp.lib.paging import Cursor
        from gloveapp.pages.views import CHATS_LISTED

        row = (
            users.get(username="heavy")
            .glove_sessions.filter(parent__isnull=True)
            .order_by("-created_at", "-key")
            .values_list("created_at", "key")[ARGS.chats // 2]
        )
        deep = Cursor(at=row[0], tie=row[1]).encode(CHATS_LISTED)
    n = ARGS.requests
    slow = max(1, min(n, 3))  # the old code's whole-history paths: a few runs only
    long_page = f"/sessions/{LONG}/"
    rows = [
        measure("GET / (20 chats)", lambda: page_light.get("/"), n),
        measure(f"GET / ({MEDIUM} chats)", lambda: page_medium.get("/"), n),
        measure(f"GET / ({ARGS.chats:,} chats)", lambda: page_heavy.get("/"), n),
    ]
    if deep:
        rows.append(
            measure(
                f"GET /?cursor= ({ARGS.chats // 2:,} chats deep)",
                lambda: page_heavy.get(f"/?cursor={deep}", HTTP_HX_REQUEST="true"),
                n,
            )
        )
    rows += [
        measure(
            f"GET {long_page} ({ARGS.long_chat:,} messages)",
            lambda: page_heavy.get(long_page),
            n if deep else slow,
        ),
        measure(
            "GET the messages partial (a refresh)",
            lambda: page_heavy.get(long_page, **htmx),
            n if deep else slow,
        ),
        measure(
            f"GET /sessions/{LONG}/history?before=50000",
            lambda: page_heavy.get(
                f"/sessions/{LONG}/history?before=50000", HTTP_HX_REQUEST="true"
            ),
            n,
        ),
        measure("GET /api/sessions (heavy user)", lambda: api.get("/api/sessions"), slow),
        measure(
            f"GET /api/sessions/{LONG}/messages?limit=100",
            lambda: api.get(f"/api/sessions/{LONG}/messages?limit=100"),
            n,
        ),
        measure(
            f"GET /api/sessions/{LONG}/messages?before=50000&limit=100",
            lambda: api.get(f"/api/sessions/{LONG}/messages?before=50000&limit=100"),
            n,
        ),
        measure(
            f"GET /api/sessions/{LONG}/messages (unpaged)",
            lambda: api.get(f"/api/sessions/{LONG}/messages"),
            n if deep else slow,
        ),
    ]
    # The same page (50 rows and a "more" row) at 60 and at 20,000 chats.
    light_ms = rows[1].get("p50_ms")
    heavy_ms = rows[2].get("p50_ms")
    ratio = heavy_ms / light_ms if light_ms and heavy_ms else None
    print(
        json.dumps(
            {
                "script": "paged_reads",
                "tree": str(TREE),
                "database": ARGS.database_url,
                "chats": ARGS.chats,
                "long_chat": ARGS.long_chat,
                "measures": rows,
                "goals": [
                    goal(
                        30,
                        f"the chat list's first page: p50 at {ARGS.chats:,} chats / at {MEDIUM}"
                        " <= 1.5",
                        f"{ratio:.2f}x" if ratio else "no answer",
                        bool(ratio and ratio <= 1.5),
                    )
                ],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
