"""/api/approvals/ at any size: a bounded count and keyset pages (`nextCursor`)."""

from __future__ import annotations

import re
from urllib.parse import unquote

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from gloveapp.api.webhooks.approvals import COUNT_CAP
from gloveapp.approvals.models import ApprovalRequest
from tests.api.test_forged_cursors import FORGERIES
from tests.approvals.helpers import open_request
from tests.approvals.test_rest import client_for

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def _copies(row: ApprovalRequest, count: int) -> None:
    """`count` more decided requests like `row` (rows written directly: opening thousands
    through the service would only slow the test)."""
    fields = {
        f.attname: getattr(row, f.attname)
        for f in ApprovalRequest._meta.concrete_fields
        if not f.primary_key
    }
    fields.update(status="decided", call_id="")
    ApprovalRequest.objects.bulk_create(
        ApprovalRequest(**{**fields, "call_id": f"c{n}"}) for n in range(count)
    )


def test_the_count_stops_at_its_cap(session_id, other_staff):
    _copies(open_request(session_id), COUNT_CAP + 5)

    body = client_for(other_staff).get("/api/approvals/?status=decided&limit=5").json()

    assert (body["count"], body["countExact"]) == (COUNT_CAP, False)
    with CaptureQueriesContext(connection) as captured:
        client_for(other_staff).get("/api/approvals/?status=decided&limit=5")
    counts = [q["sql"] for q in captured if "COUNT(" in q["sql"].upper()]
    assert counts and all("LIMIT" in sql.upper() for sql in counts)


def test_a_small_queue_is_counted_exactly(session_id, other_staff):
    open_request(session_id)

    body = client_for(other_staff).get("/api/approvals/").json()

    assert (body["count"], body["countExact"]) == (1, True)


def test_a_page_names_its_people_in_statements_its_length_does_not_add_to(
    session_id, other_staff, barista, manager, groups
):
    """Each request's assignee and escalation target (user or group) and customer, read by
    their ids: the statements are as many for a page of 40 as for a page of 2."""
    first = open_request(session_id)
    ApprovalRequest.objects.filter(pk=first.pk).update(
        assignee_user=barista,
        assignee_group=groups[0],
        escalate_to_user=manager,
        escalate_to_group=groups[1],
    )
    _copies(ApprovalRequest.objects.get(pk=first.pk), 39)
    ApprovalRequest.objects.update(status="open")
    as_otto = client_for(other_staff)

    def statements(limit: int) -> tuple[int, list[dict]]:
        with CaptureQueriesContext(connection) as captured:
            body = as_otto.get(f"/api/approvals/?limit={limit}").json()
        return len(captured), body["results"]

    statements(1)  # the token's first read is cached after it
    few, two = statements(2)
    many, forty = statements(40)

    assert few == many
    assert len(two) == 2 and len(forty) == 40
    for row in forty:
        assert row["assignee"] == {"user": "bea", "group": groups[0].name}
        assert row["escalateTo"] == {"user": "max", "group": groups[1].name}
        assert row["customer"] == "nina"


def test_the_cursor_walks_the_queue_once_in_order(session_id, other_staff):
    _copies(open_request(session_id), 23)
    as_otto = client_for(other_staff)

    body = as_otto.get("/api/approvals/?status=decided&limit=10").json()
    seen = [row["id"] for row in body["results"]]
    while body["nextCursor"]:
        body = as_otto.get(
            f"/api/approvals/?status=decided&limit=10&cursor={body['nextCursor']}"
        ).json()
        seen += [row["id"] for row in body["results"]]

    expected = ApprovalRequest.objects.filter(status="decided").order_by("created_at", "id")
    assert seen == [str(pk) for pk in expected.values_list("pk", flat=True)]


@pytest.mark.parametrize(
    ("query", "field"),
    [("cursor=nope", "cursor"), ("offset=10001", "offset"), ("offset=5&cursor=x", "cursor")],
)
def test_it_refuses_a_bad_paging_parameter_naming_it(other_staff, query, field):
    response = client_for(other_staff).get(f"/api/approvals/?{query}")

    assert response.status_code == 400
    assert response.json()["field"] == field


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_forged_cursor_is_a_400_naming_it(session_id, other_staff, name):
    open_request(session_id)

    response = client_for(other_staff).get("/api/approvals/", {"cursor": FORGERIES[name]})

    assert response.status_code == 400
    assert response.json()["field"] == "cursor"


def test_another_lists_cursor_is_refused(session_id, customer, other_staff):
    """A chat list's cursor (its tie a chat's key, not a request's UUID)."""
    for n in range(2):
        client_for(customer).post("/api/sessions", {"sessionId": f"c{n}"}, format="json")
    link = client_for(customer).get("/api/sessions", {"limit": 1})["Link"]
    handed = re.search(r"cursor=([^&>]+)", link).group(1)

    response = client_for(other_staff).get("/api/approvals/", {"cursor": unquote(handed)})

    assert response.status_code == 400
    assert response.json()["field"] == "cursor"
