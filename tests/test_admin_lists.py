"""Every changelist of the project's admin, on tables large enough to matter: no query counts
or DISTINCTs a whole table, and each list (plain, filtered, searched, sorted) costs a bounded
number of queries. On PostgreSQL the plain lists' pages are index scans, never a sort of the
table, and their counts are the planner's estimate.

The tables are seeded once for the module (bulk inserts, 12,000 rows and more each on
PostgreSQL, 3,000 on SQLite) and emptied after it. Every model registered by gloveapp, inbox
and mesh is walked, so an admin added later is checked too; its filters, search and sortable
columns are read from the page.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import uuid
from typing import Any

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib import admin
from django.contrib.admin.templatetags.admin_list import result_headers
from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from django_tasks_db.models import DBTaskResult
from rest_framework.authtoken.models import Token, TokenProxy

from gloveapp.approvals.models import ApprovalDecision, ApprovalRequest
from gloveapp.conversations.models import Message, Session
from gloveapp.demo.models import Order
from gloveapp.lib.admin import COUNT_CAP
from gloveapp.live.models import LiveEvent
from gloveapp.turns.models import Turn
from inbox.models import InboxItem
from inbox.workspaces.models import Notification, Workspace, WorkspaceEntry
from mesh.models import MeshAgent, MeshDelivery

# The seed (module-wide) is bulk inserts of some 150,000 rows: slow on a shared machine.
pytestmark = [pytest.mark.postgres, pytest.mark.timeout(900)]

# The third-party admins the project registers (re-registered bounded).
THIRD_PARTY = (DBTaskResult, TokenProxy, AccessAttempt, AccessLog, AccessFailureLog)

# Far past the exact count's cap (COUNT_CAP) on every big table; on PostgreSQL enough that
# the planner's choices (index scans, its estimate for the count) are those of a big table.
ROWS = 12_000 if os.environ.get("DATABASE_URL", "").startswith("postgres") else 3 * COUNT_CAP
MESSAGES = 2 * ROWS
# Queries one list may cost: the login and its user, the estimate or the bounded count, the
# page, a related table or two, the configured groups of a filter.
MAX_QUERIES = 10
BIG_TABLES = {
    model._meta.db_table
    for model in (
        Session,
        Message,
        Turn,
        LiveEvent,
        InboxItem,
        ApprovalRequest,
        ApprovalDecision,
        MeshDelivery,
        WorkspaceEntry,
        Notification,
        Order,
        get_user_model(),
        DBTaskResult,
        Token,
        AccessLog,
        AccessAttempt,
        AccessFailureLog,
    )
}
HEAVY_SESSION = "s_heavy"
SEARCH_TERMS = {
    # What staff type: an id, a username, a word of a title or a request.
    "session": ["s_000042", "s_0000", "alice", "Yirgacheffe"],
    "message": [HEAVY_SESSION, "17"],
    "turn": ["42", HEAVY_SESSION, "alice"],
    "liveevent": [f"session:{HEAVY_SESSION}", "7"],
    "inboxitem": ["inbox_000042", "inbox_00", HEAVY_SESSION, "restock"],
    "meshtraffic": ["inbox_000042", "mesh:from:roastery", "beans"],
    "meshagent": ["roastery", "roast"],
    "meshdelivery": ["m_000042", "shop"],
    "approvalrequest": ["checkout", HEAVY_SESSION],
    "approvaldecision": ["alice"],
    "order": ["42", HEAVY_SESSION],
    "workspace": ["w_1", "w_", "alice"],
    "workspaceentry": ["w_1"],
    "notification": ["alice"],
    "user": ["alice", "customer0004", "@brew.test"],
    "dbtaskresult": [str(uuid.UUID(int=7))],
    "tokenproxy": ["alice", "customer0004"],
    # A username, an address (both exact), a word that is neither found nor an address.
    "accesslog": ["alice", "10.0.0.7", "nobody"],
    "accessattempt": ["alice", "10.0.0.7", "2001:db8::7"],
    "accessfailurelog": ["alice", "10.0.0.7"],
}
EXACT_FILTER_VALUES = {
    "session__id__exact": HEAVY_SESSION,
    "session": HEAVY_SESSION,
    "type": "message.appended",
    "sender": "roastery",
    "recipient": "mesh:roastery",
    "tool_name": "checkout",
    "workspace__id__exact": "w_1",
    "queue_name": "default",
}


def _seed() -> None:
    User = get_user_model()
    users = User.objects.bulk_create(
        [User(username=name) for name in ("alice", "bob", "carol", "dave", "erin")]
    )
    User.objects.bulk_create(
        [
            User(username=f"customer{i:05d}", email=f"customer{i:05d}@brew.test")
            for i in range(ROWS)
        ],
        batch_size=5_000,
    )
    start = timezone.now() - dt.timedelta(days=30)

    def at(i: int) -> dt.datetime:
        return start + dt.timedelta(seconds=i)

    sessions = [
        Session(
            id=f"s_{i:06d}",
            key=f"s_{i:06d}",
            owner=users[i % len(users)],
            title=f"Do you have Yirgacheffe? #{i}" if i % 3 else f"Order {i}",
            agent_name="coffee" if i % 4 else "roastery",
        )
        for i in range(ROWS)
    ]
    sessions.append(Session(id=HEAVY_SESSION, key=HEAVY_SESSION, owner=users[0], title="Heavy"))
    Session.objects.bulk_create(sessions, batch_size=5_000)
    Session.objects.filter(pk=HEAVY_SESSION).update(last_seq=MESSAGES // 2)
    Message.objects.bulk_create(
        [
            Message(
                session_id=HEAVY_SESSION if i < MESSAGES // 2 else f"s_{i % ROWS:06d}",
                seq=i + 1 if i < MESSAGES // 2 else i // ROWS + 1000,
                sender="user" if i % 2 else "agent",
                text=f"message {i}",
            )
            for i in range(MESSAGES)
        ],
        batch_size=5_000,
    )
    Turn.objects.bulk_create(
        [
            Turn(
                session_id=HEAVY_SESSION if i % 10 == 0 else f"s_{i:06d}",
                user=users[i % len(users)],
                text=f"turn {i}",
                status="done" if i % 7 else "failed",
                attempts=1 if i % 11 else 2,
            )
            for i in range(ROWS)
        ],
        batch_size=5_000,
    )
    LiveEvent.objects.bulk_create(
        [
            LiveEvent(
                stream=f"session:{HEAVY_SESSION}" if i % 5 == 0 else f"session:s_{i:06d}",
                seq=i // 5 + 1 if i % 5 == 0 else 1,
                type="message.appended" if i % 2 else "tasks.replaced",
                payload={"seq": i},
            )
            for i in range(ROWS)
        ],
        batch_size=5_000,
    )
    items = []
    for i in range(ROWS):
        mesh = i % 4 == 0
        items.append(
            InboxItem(
                id=f"inbox_{i:06d}",
                key=f"inbox_{i:06d}",
                session_id=HEAVY_SESSION
                if i % 9 == 0
                else ("mesh:roastery" if mesh else f"s_{i:06d}"),
                tag="mesh:from:roastery" if mesh else "restock_watch",
                request="Send more beans" if mesh else "Notify me when Yirgacheffe is restocked",
                status="pending" if i % 3 == 0 else "resolved",
                created_at=at(i),
            )
        )
    Session.objects.bulk_create([Session(id="mesh:roastery", key="mesh:roastery")])
    InboxItem.objects.bulk_create(items, batch_size=5_000)
    requests = ApprovalRequest.objects.bulk_create(
        [
            ApprovalRequest(
                session_id=HEAVY_SESSION if i % 8 == 0 else f"s_{i:06d}",
                tool_name="checkout" if i % 2 else "refund",
                args={"quantity": i % 9},
                fingerprint=f"{i:064d}",
                decisions=["approve", "reject"],
                status="open" if i % 10 == 0 else "decided",
                decision="" if i % 10 == 0 else "approve",
                created_at=at(i),
            )
            for i in range(ROWS)
        ],
        batch_size=5_000,
    )
    ApprovalDecision.objects.bulk_create(
        [
            ApprovalDecision(
                request=request,
                kind="approve",
                user=users[i % len(users)],
                username=users[i % len(users)].username,
                channel="page",
                fingerprint_seen=request.fingerprint,
                decided_at=at(i),
            )
            for i, request in enumerate(requests)
            if i % 10
        ],
        batch_size=5_000,
    )
    MeshAgent.objects.bulk_create(
        [MeshAgent(agent_id="roastery", name="Roastery"), MeshAgent(agent_id="shop", name="Shop")]
    )
    MeshDelivery.objects.bulk_create(
        [
            MeshDelivery(
                message_id=f"m_{i:06d}",
                recipient="roastery" if i % 2 else "shop",
                sender="shop" if i % 2 else "roastery",
                kind="direct",
                body={"text": "beans"},
            )
            for i in range(ROWS)
        ],
        batch_size=5_000,
    )
    Order.objects.bulk_create(
        [
            Order(session_id=f"s_{i:06d}", lines=[], total_cents=100 + i, payment="pickup")
            for i in range(ROWS)
        ],
        batch_size=5_000,
    )
    workspaces = Workspace.objects.bulk_create(
        [
            Workspace(id=f"w_{i}", label=f"Desk {i}", root=f"/srv/desk{i}", owner=users[i % 5])
            for i in range(20)
        ]
    )
    WorkspaceEntry.objects.bulk_create(
        [
            WorkspaceEntry(
                id=uuid.UUID(int=i + 1),
                ts=1_700_000_000_000 + i,
                workspace=workspaces[i % 20],
                owner=workspaces[i % 20].owner,
                comments=f"entry {i}",
            )
            for i in range(ROWS)
        ],
        batch_size=5_000,
    )
    Notification.objects.bulk_create(
        [Notification(user=users[i % 5], text=f"note {i}") for i in range(ROWS)],
        batch_size=5_000,
    )
    Token.objects.bulk_create(
        [
            Token(key=f"{i:040d}", user_id=user_id)
            for i, user_id in enumerate(User.objects.values_list("pk", flat=True))
        ],
        batch_size=5_000,
    )
    DBTaskResult.objects.bulk_create(
        [
            DBTaskResult(
                status="SUCCESSFUL" if i % 50 else "FAILED",
                args_kwargs={"args": [f"s_{i:06d}"], "kwargs": {}},
                task_path="gloveapp.turns.queue.tasks.run_session_turns",
                # A queue the settings do not name (any more) is listed too.
                queue_name="default" if i % 10 else "retired",
                backend_name="default",
                run_after=at(i),
                enqueued_at=at(i),
            )
            for i in range(ROWS)
        ],
        batch_size=5_000,
    )

    # django-axes' records: a login or a failure from one of 250 addresses, for five users.
    def access(model: Any, i: int, **extra: Any) -> Any:
        return model(
            username=users[i % 5].username,
            ip_address=f"10.0.{i % 250 // 100}.{i % 100}",
            user_agent=f"browser {i % 7}",
            path_info="/accounts/login/",
            http_accept="text/html",
            **extra,
        )

    AccessLog.objects.bulk_create([access(AccessLog, i) for i in range(ROWS)], batch_size=5_000)
    AccessFailureLog.objects.bulk_create(
        [access(AccessFailureLog, i, locked_out=not i % 100) for i in range(ROWS)],
        batch_size=5_000,
    )
    AccessAttempt.objects.bulk_create(
        [
            access(AccessAttempt, i, get_data="", post_data="", failures_since_start=i % 9)
            for i in range(ROWS)
        ],
        batch_size=5_000,
        ignore_conflicts=True,  # (username, address, browser) is unique
    )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for table in sorted(BIG_TABLES | {Workspace._meta.db_table}):
                cursor.execute(f'ANALYZE "{table}"')


def _empty() -> None:
    for model in (
        AccessAttempt,
        AccessLog,
        AccessFailureLog,
        DBTaskResult,
        Token,
        Notification,
        WorkspaceEntry,
        Workspace,
        Order,
        MeshDelivery,
        MeshAgent,
        ApprovalDecision,
        ApprovalRequest,
        InboxItem,
        LiveEvent,
        Turn,
        Message,
        Session,
    ):
        model.objects.all()._raw_delete(model.objects.db)
    get_user_model().objects.all().delete()


@pytest.fixture(scope="module")
def big_tables(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        _empty()
        _seed()
        try:
            yield
        finally:
            _empty()


@pytest.fixture
def staff(big_tables, db) -> Client:
    user = get_user_model().objects.create_superuser("staff", "staff@brew.test", None)
    client = Client()
    client.force_login(user)
    return client


def our_changelists() -> list[tuple[str, str]]:
    return sorted(
        (model._meta.app_label, model._meta.model_name)
        for model in admin.site._registry
        if model.__module__.startswith(("inbox.", "mesh.", "gloveapp."))
        or model is get_user_model()
        or model in THIRD_PARTY
    )


def variants(client: Client, url: str, model_name: str) -> list[str]:
    """The plain list, each filter's first choice (or a typed value), each search term,
    each sortable column both ways."""
    page = client.get(url)
    assert page.status_code == 200, (url, page.status_code)
    changelist = page.context["cl"]
    queries = [""]
    for spec in changelist.filter_specs:
        parameter = getattr(spec, "parameter_name", None)
        if parameter in EXACT_FILTER_VALUES and spec.template.endswith("exact_value_filter.html"):
            queries.append(f"{parameter}={EXACT_FILTER_VALUES[parameter]}")
            continue
        for choice in spec.choices(changelist):
            query = choice.get("query_string", "")
            if query and query != "?" and not choice.get("selected"):
                queries.append(query.lstrip("?"))
                break
    if changelist.search_fields:
        terms = SEARCH_TERMS.get(model_name, ["x"])
        queries += [f"q={term}" for term in terms]
    for header in result_headers(changelist):
        if header.get("sortable"):
            queries.append(header["url_primary"].lstrip("?"))
            queries.append(header["url_toggle"].lstrip("?"))
    return queries


def table_wide(sql: str) -> str | None:
    """Why `sql` reads a whole big table, or None: a COUNT with no LIMIT under it, any
    DISTINCT, a date hierarchy's date list."""
    upper = sql.upper()
    if not any(f'"{table.upper()}"' in upper for table in BIG_TABLES):
        return None
    if "DISTINCT" in upper:
        return "a DISTINCT"
    if "COUNT(" in upper and "LIMIT" not in upper:
        return "an unbounded COUNT"
    if "DATE_TRUNC" in upper or "DJANGO_DATETIME_TRUNC" in upper:
        return "a list of dates"
    return None


@pytest.mark.django_db
@pytest.mark.parametrize("app_label,model_name", our_changelists())
def test_it_answers_every_list_in_bounded_queries(staff, app_label, model_name):
    url = reverse(f"admin:{app_label}_{model_name}_changelist")
    problems = []
    for query in variants(staff, url, model_name):
        with CaptureQueriesContext(connection) as captured:
            answer = staff.get(f"{url}?{query}" if query else url)
        if answer.status_code != 200:
            problems.append(f"?{query}: {answer.status_code}")
            continue
        if len(captured) > MAX_QUERIES:
            problems.append(f"?{query}: {len(captured)} queries")
        for entry in captured:
            why = table_wide(entry["sql"])
            if why:
                problems.append(f"?{query}: {why}: {entry['sql'][:300]}")
    assert not problems, "\n".join(problems)


HOSTILE = [
    "q=%00",
    "q=" + "9" * 40,
    "q=" + "x" * 5000,
    "q=-1",
    "session=%00",
    "session__id__exact=%00",
    "sender=%00",
    "agent=%00",
    "source=nope",
    "tool_name=" + "y" * 5000,
    "p=-1",
    "p=99999999",
    "id__gt=" + "9" * 30,
    "attempts=99999999999999999999",
]


@pytest.mark.django_db
@pytest.mark.parametrize("app_label,model_name", our_changelists())
def test_no_typed_value_makes_a_list_fail(staff, app_label, model_name):
    url = reverse(f"admin:{app_label}_{model_name}_changelist")
    answers = {query: staff.get(f"{url}?{query}").status_code for query in HOSTILE}
    assert all(status < 500 for status in answers.values()), answers


@pytest.mark.django_db
def test_it_shows_an_estimate_or_a_bounded_count(staff):
    page = staff.get(reverse("admin:conversations_message_changelist")).content.decode()
    if connection.vendor == "postgresql":
        assert re.search(r"about [\d,]+ messages", page), "the planner's estimate"
    else:
        assert f"more than {COUNT_CAP} messages" in page

    one = staff.get(
        reverse("admin:conversations_message_changelist") + f"?session={HEAVY_SESSION}"
    ).content.decode()
    assert f"more than {COUNT_CAP} messages" in one
    # One session's messages, newest first: its highest seq on the first page.
    assert f">{MESSAGES // 2}</td>" in one


@pytest.mark.django_db
def test_it_offers_no_page_past_the_counted_rows(staff):
    url = reverse("admin:conversations_message_changelist")
    last = COUNT_CAP // 50
    assert staff.get(f"{url}?p={last}").status_code == 200
    # Past it: Django's "page out of range" answer (a redirect to the first page), no OFFSET.
    assert staff.get(f"{url}?p={last + 1}").status_code == 302


@pytest.mark.django_db
def test_the_messages_list_is_read_only(staff):
    message = Message.objects.filter(session_id=HEAVY_SESSION).first()
    page = staff.get(reverse("admin:conversations_message_change", args=[message.pk]))
    assert page.status_code == 200
    assert message.text in page.content.decode()
    assert b'name="_save"' not in page.content
    assert staff.get(reverse("admin:conversations_message_add")).status_code == 403
    assert (
        staff.post(reverse("admin:conversations_message_delete", args=[message.pk])).status_code
        == 403
    )


@pytest.mark.django_db
@pytest.mark.skipif("connection.vendor != 'postgresql'")
@pytest.mark.parametrize(
    "url",
    [
        "/admin/conversations/session/",
        "/admin/conversations/message/",
        f"/admin/conversations/message/?session={HEAVY_SESSION}",
        "/admin/turns/turn/",
        "/admin/live/liveevent/",
        "/admin/inbox/inboxitem/",
        "/admin/approvals/approvalrequest/",
        "/admin/approvals/approvaldecision/",
        "/admin/mesh/meshdelivery/",
        "/admin/inbox/workspaceentry/",
        "/admin/inbox/notification/",
        "/admin/demo/order/",
        "/admin/conversations/session/?q=Yirgacheffe",
        "/admin/conversations/session/?q=alice",
        "/admin/inbox/inboxitem/?q=restock",
        "/admin/auth/user/",
        "/admin/auth/user/?q=customer0004",
        "/admin/axes/accesslog/",
        "/admin/axes/accesslog/?q=alice",
        "/admin/axes/accessattempt/",
        "/admin/axes/accessfailurelog/?q=alice",
    ],
)
def test_on_postgresql_a_page_is_an_index_scan_not_a_sort_of_the_table(staff, url):
    with CaptureQueriesContext(connection) as captured:
        assert staff.get(url).status_code == 200
    pages = [q["sql"] for q in captured if " LIMIT " in q["sql"] and " ORDER BY " in q["sql"]]
    if not pages:  # a search that matched nothing: no page to read
        assert "?q=" in url, [q["sql"] for q in captured]
        return
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = on")
        cursor.execute("EXPLAIN " + pages[-1])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Seq Scan" not in plan, plan
    # A search's few matches (at most SEARCH_SORT_CAP) are read by their ids and sorted
    # among themselves; anything else is a range of the list's order.
    if not re.search(r"Index Cond: .*\bid\)?(::text)? = ANY \(", plan):
        assert not re.search(r"^\s*(->\s*)?Sort  \(", plan, re.M), plan


@pytest.mark.django_db
@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_on_postgresql_a_search_with_few_matches_sorts_only_them(staff):
    # One item's id: its page is read by that id, not by walking the list's order.
    item = InboxItem.objects.order_by("created_at").first()
    with CaptureQueriesContext(connection) as captured:
        page = staff.get(f"/admin/inbox/inboxitem/?q={item.pk}")
    assert page.status_code == 200
    assert item.pk in page.content.decode()
    # The page's rows (whole rows, not the ids read first or the count).
    row = 'SELECT "inbox_inboxitem"."id", "inbox_inboxitem"."key"'
    (read,) = [q["sql"] for q in captured if q["sql"].startswith(row)]
    assert f'"inbox_inboxitem"."id" IN (\'{item.pk}\')' in read, read


@pytest.mark.django_db
@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_on_postgresql_an_approvals_search_by_session_or_tool_reads_indexes(staff):
    # The search is exact on the id, the tool name or the session id: with no index on the
    # tool name (`approval_tool_created_idx`) the OR could only be a read of the table.
    with CaptureQueriesContext(connection) as captured:
        page = staff.get("/admin/approvals/approvalrequest/?q=s_000042")
    assert page.status_code == 200
    assert "s_000042" in page.content.decode()
    reads = [q["sql"] for q in captured if '"approvals_approvalrequest"."tool_name" =' in q["sql"]]
    assert reads, [q["sql"] for q in captured]
    with connection.cursor() as cursor:
        for sql in reads:
            cursor.execute("EXPLAIN " + sql)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            assert "Seq Scan on approvals_approvalrequest" not in plan, plan


def every_filter_value(client: Client, url: str) -> list[str]:
    """Each choice of each filter (a typed value for the exact-value ones), one at a time."""
    page = client.get(url)
    assert page.status_code == 200, (url, page.status_code)
    changelist = page.context["cl"]
    queries = []
    for spec in changelist.filter_specs:
        parameter = getattr(spec, "parameter_name", None)
        if spec.template.endswith("exact_value_filter.html"):
            queries.append(f"{parameter}={EXACT_FILTER_VALUES.get(parameter, 'x')}")
            continue
        for choice in spec.choices(changelist):
            query = choice.get("query_string", "")
            if query and query != "?" and not choice.get("selected"):
                queries.append(query.lstrip("?"))
    return queries


# A value that many rows hold: a walk in the list's order that filters row by row finds a
# page (or the bounded count's rows) within a few times LIMIT / COMMON rows, whatever the
# table's size. A rarer value must have an index of its own.
COMMON = 0.05


def walks_a_big_table(plan: dict, rows_of: Any) -> str | None:
    """Why a plan (EXPLAIN's JSON) would read a big table whole for a rare value, or None:
    a sequential scan, or a whole index (not a partial one) walked with the filter applied
    row by row, where the planner expects the filter to keep fewer than COMMON of the rows."""
    relation = plan.get("Relation Name", "")
    big = relation in BIG_TABLES or any(relation.startswith(f"{t}_p") for t in BIG_TABLES)
    walk = plan["Node Type"] == "Seq Scan" or (
        plan["Node Type"] in ("Index Scan", "Index Only Scan")
        and "Index Cond" not in plan
        and "Filter" in plan
        # A partial index holds its few rows only (the unfinished turns, say).
        and not is_partial(plan["Index Name"])
    )
    if big and walk and plan["Plan Rows"] < COMMON * rows_of(relation):
        how = plan.get("Index Name", "a Seq Scan")
        return f"{how} on {relation} walked for {plan.get('Filter', 'every row')}"
    for child in plan.get("Plans", []):
        found = walks_a_big_table(child, rows_of)
        if found:
            return found
    return None


def is_partial(index: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indpred IS NOT NULL FROM pg_index WHERE indexrelid = %s::regclass", [index]
        )
        return bool(cursor.fetchone()[0])


def planner_rows(relation: str) -> float:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT GREATEST(reltuples, 1) FROM pg_class WHERE oid = %s::regclass", [relation]
        )
        return float(cursor.fetchone()[0])


@pytest.mark.django_db
@pytest.mark.skipif("connection.vendor != 'postgresql'")
@pytest.mark.parametrize("app_label,model_name", our_changelists())
def test_on_postgresql_every_filter_value_reads_an_index_of_its_own(staff, app_label, model_name):
    # Whatever the value (a rare one most of all: `?source=api`, `?decision=edit`), the page
    # and its bounded count start from an index on the filtered column, never from a walk of
    # the table. Sequential scans are off so the plan shows which index could serve it: a
    # small test table would otherwise be read whole because that is cheaper.
    url = reverse(f"admin:{app_label}_{model_name}_changelist")
    problems = []
    for query in every_filter_value(staff, url):
        with CaptureQueriesContext(connection) as captured:
            answer = staff.get(f"{url}?{query}")
        if answer.status_code != 200:
            problems.append(f"?{query}: {answer.status_code}")
            continue
        for entry in captured:
            sql = entry["sql"]
            if not sql.lstrip().upper().startswith("SELECT") or not table_wide_candidate(sql):
                continue
            with connection.cursor() as cursor:
                cursor.execute("SET enable_seqscan = off")
                try:
                    cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
                    plan = cursor.fetchone()[0][0]["Plan"]
                finally:
                    cursor.execute("SET enable_seqscan = on")
            why = walks_a_big_table(plan, planner_rows)
            if why:
                problems.append(f"?{query}: {why}: {sql[:300]}")
    assert not problems, "\n".join(problems)


def table_wide_candidate(sql: str) -> bool:
    upper = sql.upper()
    return " WHERE " in upper and any(f'"{table.upper()}"' in upper for table in BIG_TABLES)


@pytest.mark.django_db
def test_an_api_tokens_page_asks_for_its_user_by_id_not_from_a_list_of_everyone(staff):
    alice = get_user_model().objects.get(username="alice")
    page = staff.get(reverse("admin:authtoken_tokenproxy_change", args=[alice.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert re.search(r'<input[^>]*name="user"', html)
    assert not re.search(r'<select[^>]*name="user"', html)
    assert "customer00042" not in html, "no dropdown of every user"
    assert len(page.content) < 1_000_000


@pytest.mark.django_db
def test_a_live_events_page_is_linked_by_its_id_and_day(staff):
    listed = staff.get(reverse("admin:live_liveevent_changelist")).content.decode()
    links = re.findall(r'href="/admin/live/liveevent/(\d+)~(\d{8})/change/', listed)
    assert links, "the list links each event with its day"
    number, day = links[0]
    event = LiveEvent.objects.get(pk=int(number))
    assert event.created_at.astimezone(dt.UTC).strftime("%Y%m%d") == day

    captures = [CaptureQueriesContext(connections[alias]) for alias in connections]
    with contextlib.ExitStack() as stack:
        for capture in captures:
            stack.enter_context(capture)
        page = staff.get(f"/admin/live/liveevent/{number}~{day}/change/")
    captured = [query for capture in captures for query in capture.captured_queries]
    assert page.status_code == 200 and event.stream in page.content.decode()
    # A bare id (an older link) still finds it; a wrong day or a word finds nothing.
    assert staff.get(f"/admin/live/liveevent/{number}/change/").status_code == 200
    assert staff.get(f"/admin/live/liveevent/{number}~19990101/change/").status_code == 302
    assert staff.get("/admin/live/liveevent/nope~x/change/").status_code == 302
    if connection.vendor == "postgresql":
        [lookup, *_] = [q["sql"] for q in captured if '"created_at" >=' in q["sql"]]
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN " + lookup)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        # One day's partition, not every day's.
        assert len(re.findall(r" on conversations_liveevent_\w+", plan)) == 1, plan
