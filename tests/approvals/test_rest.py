"""/api/approvals/: list (queues), read and decide, as staff; outsiders learn nothing."""

from __future__ import annotations

import uuid

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from gloveapp.approvals.models import ApprovalRequest
from gloveapp.core.approvals.decisions import fingerprint
from tests.approvals.agents import ORDER
from tests.approvals.helpers import open_request

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def request_row(session_id):
    return open_request(session_id)


def ids(response) -> list[str]:
    assert response.status_code == 200, response.json()
    return [row["id"] for row in response.json()["results"]]


def test_it_lists_the_queues_of_the_caller(session_id, barista, manager, other_staff):
    barista_row = open_request(session_id)
    shared_row = open_request(session_id, assignee_group=None)
    mine_row = open_request(session_id, assignee_user="otto", assignee_group=None)
    as_otto = client_for(other_staff)
    assert ids(as_otto.get("/api/approvals/?view=mine")) == [str(mine_row.pk)]
    assert ids(as_otto.get("/api/approvals/?view=unassigned")) == [str(shared_row.pk)]
    assert ids(client_for(barista).get("/api/approvals/?view=groups")) == [str(barista_row.pk)]
    assert ids(client_for(manager).get("/api/approvals/?view=groups")) == []
    assert len(ids(as_otto.get("/api/approvals/"))) == 3
    ApprovalRequest.objects.filter(pk=barista_row.pk).update(escalate_at="2000-01-01T00:00Z")
    assert ids(as_otto.get("/api/approvals/?view=overdue")) == [str(barista_row.pk)]
    page = as_otto.get("/api/approvals/?limit=2").json()
    assert (len(page["results"]), page["count"], page["next"]) == (2, 3, 2)


def test_it_reads_a_request_with_what_the_caller_may_do(request_row, barista, other_staff):
    body = client_for(barista).get(f"/api/approvals/{request_row.pk}").json()
    assert body["args"] == ORDER
    assert body["fingerprint"] == fingerprint("place_order", ORDER)
    assert body["decisions"] == ["approve", "edit", "reject", "respond"]
    assert body["assignee"] == {"user": None, "group": "baristas"}
    assert body["mayDecide"] is True
    assert 3590 <= body["secondsLeft"] <= 3600
    # What people read of it, from the tool's label and summary when it was opened.
    assert body["label"] == "Place order" and body["customer"] == "nina"
    assert (body["summary"], body["total"]) == ("Wholesale: 12 bags of Yirgacheffe", "$120.00")
    assert (
        client_for(other_staff).get(f"/api/approvals/{request_row.pk}").json()["mayDecide"] is False
    )


def test_an_outsider_gets_the_same_404_whether_or_not_it_exists(request_row, customer):
    as_customer = client_for(customer)
    for approval_id in (request_row.pk, uuid.uuid4(), "not-an-id"):
        read = as_customer.get(f"/api/approvals/{approval_id}")
        decided = as_customer.post(
            f"/api/approvals/{approval_id}/decide",
            {"decision": "approve", "fingerprint": request_row.fingerprint},
            format="json",
        )
        assert (read.status_code, decided.status_code) == (404, 404)
        assert read.json() == decided.json() == {"error": "No such approval request."}
    assert as_customer.get("/api/approvals/").status_code == 403
    assert APIClient().get("/api/approvals/").status_code in (401, 403)
    request_row.refresh_from_db()
    assert request_row.status == "open"


def test_edit_through_rest_records_the_edited_arguments(request_row, barista):
    edited = {"product": "Yirgacheffe", "quantity": 2}
    response = client_for(barista).post(
        f"/api/approvals/{request_row.pk}/decide",
        {"decision": "edit", "fingerprint": request_row.fingerprint, "args": edited},
        format="json",
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "decided"
    assert body["decision"]["decision"] == "edit"
    assert body["decision"]["args"] == edited
    assert (body["decision"]["by"], body["decision"]["channel"]) == ("bea", "rest")


@pytest.mark.parametrize(
    ("edited", "field"),
    [
        ({"product": "Yirgacheffe", "quantity": 2, "discount": 100}, "args.discount"),
        ({"product": "x" * 300_000, "quantity": 2}, "args"),
        ({"product": "Yirgacheffe", "quantity": 2}, None),
    ],
    ids=["unknown-key", "over-256-KiB", "fits"],
)
def test_an_edit_is_held_to_the_tools_schema_and_the_stores_bounds(
    request_row, barista, edited, field
):
    response = client_for(barista).post(
        f"/api/approvals/{request_row.pk}/decide",
        {"decision": "edit", "fingerprint": request_row.fingerprint, "args": edited},
        format="json",
    )
    if field is None:
        assert response.status_code == 200, response.json()
        return
    assert response.status_code == 400
    assert response.json()["field"] == field
    request_row.refresh_from_db()
    assert request_row.status == "open"


def test_an_edit_nested_900_levels_deep_is_400_not_stored(request_row, barista):
    deep = '{"a": ' * 900 + '"x"' + "}" * 900
    body = (
        f'{{"decision": "edit", "fingerprint": "{request_row.fingerprint}", '
        f'"args": {{"product": {deep}, "quantity": 1}}}}'
    )
    response = client_for(barista).post(
        f"/api/approvals/{request_row.pk}/decide", body, content_type="application/json"
    )
    assert response.status_code == 400
    request_row.refresh_from_db()
    assert request_row.status == "open"


def test_a_stale_fingerprint_is_409_with_the_current_one(request_row, barista):
    stale = fingerprint("place_order", {**ORDER, "quantity": 1})
    response = client_for(barista).post(
        f"/api/approvals/{request_row.pk}/decide",
        {"decision": "approve", "fingerprint": stale},
        format="json",
    )
    assert response.status_code == 409
    assert response.json()["fingerprint"] == request_row.fingerprint
    request_row.refresh_from_db()
    assert request_row.status == "open"


def test_the_loser_gets_409_naming_the_winners_decision(request_row, barista, manager, db):
    manager.groups.add(*barista.groups.all())
    first = client_for(barista).post(
        f"/api/approvals/{request_row.pk}/decide",
        {"decision": "reject", "fingerprint": request_row.fingerprint, "reason": "No beans"},
        format="json",
    )
    second = client_for(manager).post(
        f"/api/approvals/{request_row.pk}/decide",
        {"decision": "approve", "fingerprint": request_row.fingerprint},
        format="json",
    )
    assert first.status_code == 200
    assert second.status_code == 409
    winner = second.json()["winner"]
    assert (winner["decision"], winner["by"], winner["reason"]) == ("reject", "bea", "No beans")


def test_bad_decisions_are_400_and_someone_elses_request_is_403(request_row, barista, other_staff):
    as_barista = client_for(barista)
    for body in (
        {"decision": "maybe", "fingerprint": request_row.fingerprint},
        {"decision": "edit", "fingerprint": request_row.fingerprint, "args": {"quantity": "x"}},
        {"decision": "respond", "fingerprint": request_row.fingerprint},
        {"decision": "reject", "fingerprint": request_row.fingerprint, "reason": "a\x00b"},
        {},
    ):
        response = as_barista.post(f"/api/approvals/{request_row.pk}/decide", body, format="json")
        assert response.status_code == 400, (body, response.json())
    response = client_for(other_staff).post(
        f"/api/approvals/{request_row.pk}/decide",
        {"decision": "approve", "fingerprint": request_row.fingerprint},
        format="json",
    )
    assert response.status_code == 403


def test_a_signed_webhook_decides_as_the_webhook_channel(settings, request_row, client):
    import hashlib
    import hmac
    import json
    import time

    settings.GLOVE_WEBHOOK_SECRET = secret = "a-long-random-secret-for-approval-hooks"
    body = json.dumps(
        {
            "decision": "approve",
            "fingerprint": request_row.fingerprint,
            "requestId": str(request_row.pk),
        }
    ).encode()
    timestamp = str(int(time.time()))
    signature = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)

    def post(sig: str):
        return client.post(
            f"/api/approvals/{request_row.pk}/decide",
            data=body,
            content_type="application/json",
            HTTP_X_GLOVE_TIMESTAMP=timestamp,
            HTTP_X_GLOVE_SIGNATURE=sig,
        )

    assert post("sha256=" + "0" * 64).status_code in (401, 403)
    response = post("sha256=" + signature.hexdigest())
    assert response.status_code == 200, response.json()
    decision = response.json()["decision"]
    assert (decision["channel"], decision["by"]) == ("webhook", None)
