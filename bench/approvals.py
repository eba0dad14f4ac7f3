"""Approvals: a decision reaching the tool in another process, and /approvals/ at 10,000 open.

Starts its own server (Daphne, one process, as `make run`) and a turn worker (another
process) on a fresh database with the demo (`setup_demo`). This process is a third one: it
queues the coffee demo's large checkouts (6 bags, over GLOVE_DEMO_APPROVAL_BAGS), waits for
each approval request, and decides it over REST as the barista (the server process); the
time until the worker has run the checkout tool (its confirmation prompt stored) is
"decision -> tool running". Then it loads 10,000 open requests and times the staff page
`/approvals/` (the first page of 50, per queue) and `GET /api/approvals/`. Prints JSON.

Floor: `/approvals/` with 10,000 open requests: p50 <= 50 ms (issue 25) for every queue (one
index range scan, the page's 50 rows). Anchor: decision -> tool running is the worker's wake-up
(PostgreSQL: a NOTIFY at the decision's commit; SQLite: its GLOVE_TURN_POLL_SECONDS poll, 20 ms)
plus the tool's own database work; bench/README.md.

    .venv/bin/python bench/approvals.py
    .venv/bin/python bench/approvals.py --database-url postgres://postgres@127.0.0.1:5432/glove_bench
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.report import goal, percentile  # noqa: E402
from tests.api.liveserver import LiveServer  # noqa: E402

DECISIONS = 20
OPEN_REQUESTS = 10_000
REQUESTS = 100
WARMUP = 10
BARISTA_PASSWORD = "barista-bench-pw-1"
WAIT = 60.0
FLOOR = "GET /healthz (floor: static JSON, same client and middleware)"


def setup_django(database_url: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    # 40 turns in a minute from one customer: past the default per-user limit.
    os.environ["GLOVE_TURNS_PER_USER_PER_MINUTE"] = "1000"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gloveapp.settings")
    import django

    django.setup()


def summary(latencies: list[float]) -> dict:
    return {
        "p50_ms": round(percentile(latencies, 0.5) * 1000, 2),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
    }


def until(predicate, what: str):
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.002)
    raise RuntimeError(f"timed out waiting for {what}")


def time_decisions(server: LiveServer, token: str) -> list[float]:
    """Decision (REST, the server's process) -> the checkout tool has run (the worker's)."""
    from django.contrib.auth import get_user_model

    from gloveapp.approvals.models import ApprovalRequest
    from gloveapp.conversations.services import session_create
    from gloveapp.turns import lifecycle
    from gloveapp.turns import public as turns
    from gloveapp.turns.models import TurnSlot

    customer = get_user_model().objects.get(username="demo")
    samples = []
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Token {token}"}) as api:
        for _ in range(DECISIONS):
            session = session_create(owner=customer, agent_name="coffee", title="Bench")
            turns.submit_message_sync(session_id=session.pk, text="add 6 Colombia")
            until(lambda s=session: not turns.is_busy(s.pk), "the add to cart")
            turns.submit_message_sync(session_id=session.pk, text="checkout, pay at pickup")
            request = until(
                lambda s=session: ApprovalRequest.objects.filter(
                    session_id=s.pk, status="open"
                ).first(),
                "the approval request",
            )
            started = time.time()
            response = api.post(
                f"/api/approvals/{request.pk}/decide",
                json={"decision": "approve", "fingerprint": request.fingerprint},
            )
            if response.status_code != 200:
                raise RuntimeError(f"decide: {response.status_code} {response.text[:200]}")
            slot = until(
                lambda s=session: (
                    TurnSlot.objects.filter(session_id=s.pk, renderer="checkout")
                    .values_list("created_at", flat=True)
                    .first()
                ),
                "the checkout tool",
            )
            samples.append(max(0.0, slot.timestamp() - started))
            lifecycle.turn_cancel(session_id=session.pk)  # the confirmation is not the point
            until(lambda s=session: not turns.is_busy(s.pk), "the cancelled turn")
    return samples


def load_open_requests(count: int) -> None:
    """`count` open requests: a quarter assigned to the baristas, a quarter to the barista,
    a quarter unassigned, a quarter to the managers; some overdue."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.utils import timezone

    from gloveapp.approvals.models import ApprovalRequest
    from gloveapp.conversations.services import session_create
    from gloveapp.core.approvals.decisions import fingerprint

    customer = get_user_model().objects.get(username="demo")
    barista = get_user_model().objects.get(username="barista")
    baristas, managers = Group.objects.get(name="baristas"), Group.objects.get(name="managers")
    session = session_create(owner=customer, agent_name="coffee", title="Bench load")
    now = timezone.now()
    rows = []
    for n in range(count):
        args = {"payment": "pickup", "lines": [{"coffee": "Colombia Huila", "quantity": 6 + n}]}
        kind = n % 4
        rows.append(
            ApprovalRequest(
                id=uuid.uuid4(),
                session_id=session.pk,
                tool_name="checkout",
                args=args,
                fingerprint=fingerprint("checkout", args),
                decisions=["approve", "edit", "reject"],
                assignee_group=baristas if kind == 0 else managers if kind == 3 else None,
                assignee_user=barista if kind == 1 else None,
                created_at=now - timedelta(seconds=count - n),
                escalate_at=now - timedelta(seconds=1) if n % 10 == 0 else None,
                expires_at=now + timedelta(hours=1),
            )
        )
    ApprovalRequest.objects.bulk_create(rows, batch_size=1000)
    # The planner's statistics, as autovacuum would gather them within a minute: without
    # them PostgreSQL believes the table holds a handful of rows and sorts the whole queue.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE approvals_approvalrequest")


def page_client(server: LiveServer) -> httpx.Client:
    """The barista, logged in through the login form (the page's session cookie)."""
    client = httpx.Client(base_url=server.url, timeout=60, follow_redirects=False)
    page = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    done = client.post(
        "/accounts/login/",
        data={"username": "barista", "password": BARISTA_PASSWORD, "csrfmiddlewaretoken": token},
        headers={"Referer": f"{server.url}/accounts/login/"},
    )
    if done.status_code != 302:
        raise RuntimeError(f"login failed: {done.status_code}")
    return client


def time_listing(server: LiveServer, token: str) -> dict:
    probes = [
        (f"/approvals/ {view}", "/approvals/", {"view": view})
        for view in ("all", "mine", "groups", "unassigned", "overdue")
    ]
    probes.append(("GET /api/approvals/ all", "/api/approvals/", {"view": "all"}))
    # The floor: Django's whole middleware answering static JSON to the same logged-in
    # client (its session cookie sent; /healthz reads neither the session nor the database).
    probes.append((FLOOR, "/healthz", {}))
    latencies: dict[str, list[float]] = {name: [] for name, _, _ in probes}
    page = page_client(server)
    api = httpx.Client(base_url=server.url, headers={"Authorization": f"Token {token}"}, timeout=60)
    try:
        for round_number in range(WARMUP + REQUESTS):
            for name, path, params in probes:
                client = api if path.startswith("/api/") else page
                expected = '"ok"' if path == "/healthz" else "checkout"
                started = time.perf_counter()
                response = client.get(path, params=params)
                elapsed = time.perf_counter() - started
                if response.status_code != 200 or expected not in response.text:
                    raise RuntimeError(f"{name}: {response.status_code} {response.text[:200]}")
                if round_number >= WARMUP:
                    latencies[name].append(elapsed)
    finally:
        page.close()
        api.close()
    return {name: summary(values) for name, values in latencies.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None)
    parser.add_argument(
        "--listing-only", action="store_true", help="skip the decisions; time the listing only"
    )
    args = parser.parse_args()
    env = {"BARISTA_PASSWORD": BARISTA_PASSWORD, "REDIS_URL": ""}
    with LiveServer(database_url=args.database_url, extra_env=env) as server:
        server.manage("setup_demo")
        server.start_worker()
        setup_django(server.database_url)
        token = server.token_for("barista")
        decisions = [] if args.listing_only else time_decisions(server, token)
        load_open_requests(OPEN_REQUESTS)
        listing = time_listing(server, token)
    results: dict = {
        "database": "postgresql" if args.database_url else "sqlite",
        "decision_to_tool": {
            "samples": len(decisions),
            **(summary(decisions) if decisions else {}),
        },
        "open_requests": OPEN_REQUESTS,
        "listing": listing,
    }
    pages = {name: v for name, v in listing.items() if name.startswith("/approvals/")}
    worst = max(v["p50_ms"] for v in pages.values())
    floor = listing[FLOOR]["p50_ms"]
    results["ratio_to_floor"] = {
        name: round(v["p50_ms"] / floor, 1) if floor else None for name, v in pages.items()
    }
    results["floor_ok"] = worst <= 50
    results["measures"] = [
        {
            "measure": "decision over REST -> the tool runs in the worker (another process)",
            **results["decision_to_tool"],
        }
    ] * bool(decisions) + [
        {
            "measure": name if name == FLOOR else f"{name}, {OPEN_REQUESTS:,} open requests",
            **figures,
        }
        for name, figures in listing.items()
    ]
    results["goals"] = [
        goal(
            25,
            f"/approvals/ with {OPEN_REQUESTS:,} open requests: p50 <= 50 ms (every queue)",
            f"{worst} ms (slowest queue's p50; {round(worst / floor, 1) if floor else '?'} x"
            f" the static floor's {floor} ms)",
            results["floor_ok"],
        )
    ]
    print(json.dumps(results, indent=2))
    if not results["floor_ok"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
