"""The staff page /approvals/: queues, the request as a form, deciding in place."""

from __future__ import annotations

import uuid

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.admin.utils import quote
from django.test import Client

from gloveapp.approvals.models import ApprovalDecision
from gloveapp.approvals.services import approval_decide
from gloveapp.core.approvals.decisions import Decision, fingerprint
from tests.approvals.agents import ORDER
from tests.approvals.helpers import open_request

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_staff_see_their_queues_and_the_request_as_a_form(session_id, barista):
    row = open_request(session_id)
    as_barista = client_for(barista)
    page = as_barista.get("/approvals/?view=groups").content.decode()
    assert "place_order" in page and str(row.pk) in page
    assert str(row.pk) not in as_barista.get("/approvals/?view=mine").content.decode()
    detail = as_barista.get(f"/approvals/{row.pk}").content.decode()
    assert 'name="arg__quantity" value="12"' in detail
    assert 'type="number"' in detail
    assert "Time left" in detail
    assert f"/admin/conversations/session/{quote(session_id)}/change/" in detail
    assert "Approve" in detail and "Reject" in detail


def test_outsiders_get_the_same_404_whether_or_not_it_exists(session_id, customer):
    row = open_request(session_id)
    as_customer = client_for(customer)
    assert as_customer.get("/approvals/").status_code == 404
    for approval_id in (row.pk, uuid.uuid4(), "nope"):
        assert as_customer.get(f"/approvals/{approval_id}").status_code == 404
        decided = as_customer.post(
            f"/approvals/{approval_id}/decide",
            {"decision": "approve", "fingerprint": row.fingerprint},
        )
        assert decided.status_code == 404
    assert Client().get("/approvals/").status_code == 302  # to the login page
    assert not ApprovalDecision.objects.exists()


def test_approving_with_an_edited_quantity_is_an_edit_decision(session_id, barista):
    row = open_request(session_id)
    response = client_for(barista).post(
        f"/approvals/{row.pk}/decide",
        {
            "decision": "approve",
            "fingerprint": row.fingerprint,
            "arg__product": "Yirgacheffe",
            "arg__quantity": "3",
        },
    )
    assert response.status_code == 302
    made = ApprovalDecision.objects.get(request=row)
    assert (made.kind, made.args, made.channel, made.username) == (
        "edit",
        {"product": "Yirgacheffe", "quantity": 3},
        "page",
        "bea",
    )


def test_approving_unchanged_arguments_is_an_approval(session_id, barista):
    row = open_request(session_id)
    client_for(barista).post(
        f"/approvals/{row.pk}/decide",
        {
            "decision": "approve",
            "fingerprint": row.fingerprint,
            "arg__product": "Yirgacheffe",
            "arg__quantity": "12",
        },
    )
    assert ApprovalDecision.objects.get(request=row).kind == "approve"


def test_a_stale_form_or_a_second_decision_says_why_in_place(session_id, barista):
    row = open_request(session_id)
    as_barista = client_for(barista)
    stale = fingerprint("place_order", {**ORDER, "quantity": 1})
    response = as_barista.post(
        f"/approvals/{row.pk}/decide",
        {"decision": "reject", "fingerprint": stale},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    assert "arguments changed" in response.content.decode()
    as_barista.post(
        f"/approvals/{row.pk}/decide",
        {"decision": "reject", "fingerprint": row.fingerprint, "reason": "No"},
    )
    again = as_barista.post(
        f"/approvals/{row.pk}/decide", {"decision": "approve", "fingerprint": row.fingerprint}
    )
    assert again.status_code == 409
    assert "already decided: reject by bea" in again.content.decode()
    done = as_barista.get(f"/approvals/{row.pk}").content.decode()
    assert "Rejected" in done and "No" in done


def _cookie(user) -> str:
    return f"sessionid={client_for(user).cookies['sessionid'].value}"


@pytest.mark.django_db(transaction=True)
async def test_the_live_socket_is_for_staff_only_and_carries_decisions(
    session_id, barista, customer
):
    from channels.db import database_sync_to_async

    from gloveapp.asgi import application
    from gloveapp.core.approvals.decisions import Decision

    async def connect(user):
        cookie = await database_sync_to_async(_cookie)(user)
        communicator = WebsocketCommunicator(
            application,
            "/ws/approvals/",
            headers=[(b"origin", b"http://testserver"), (b"cookie", cookie.encode())],
        )
        return communicator, await communicator.connect(timeout=10)

    refused, _ = await connect(customer)
    assert (await refused.receive_output(timeout=10))["code"] == 4404
    socket, (connected, _) = await connect(barista)
    assert connected
    row = await database_sync_to_async(open_request)(session_id)
    await database_sync_to_async(approval_decide)(
        request_id=row.pk, decision=Decision("approve", row.fingerprint), channel="python"
    )
    seen = []
    while "approval.decided" not in seen:
        seen.append((await socket.receive_json_from(timeout=10))["type"])
    assert seen[0] == "approval.opened"
    await socket.disconnect()


def test_the_admin_shows_decisions_and_exports_the_audit_as_csv(session_id, barista, admin_user):
    import csv
    import io

    row = open_request(session_id)
    approval_decide(
        request_id=row.pk,
        decision=Decision("edit", row.fingerprint, args={"product": "Yirgacheffe", "quantity": 2}),
        user=barista,
        channel="page",
    )
    as_admin = client_for(admin_user)
    change = as_admin.get(f"/admin/approvals/approvalrequest/{row.pk}/change/")
    assert change.status_code == 200
    assert "bea" in change.content.decode()
    exported = as_admin.post(
        "/admin/approvals/approvaldecision/",
        {"action": "export_audit", "_selected_action": [ApprovalDecision.objects.get().pk]},
    )
    assert exported["Content-Type"] == "text/csv"
    lines = list(csv.reader(io.StringIO(b"".join(exported.streaming_content).decode())))
    assert lines[0][:6] == ["request", "tool", "session", "decision", "by", "channel"]
    assert lines[1][3:6] == ["edit", "bea", "page"]
    assert '"quantity": 2' in lines[1][10]


def test_the_admin_approves_or_rejects_selected_requests(session_id, admin_user):
    approving, rejecting = open_request(session_id), open_request(session_id)
    as_admin = client_for(admin_user)
    for row, action in ((approving, "approve_selected"), (rejecting, "reject_selected")):
        response = as_admin.post(
            "/admin/approvals/approvalrequest/",
            {"action": action, "_selected_action": [str(row.pk)]},
        )
        assert response.status_code == 302
    made = {d.request_id: d for d in ApprovalDecision.objects.all()}
    assert (made[approving.pk].kind, made[approving.pk].channel) == ("approve", "admin")
    assert (made[rejecting.pk].kind, made[rejecting.pk].username) == ("reject", "admin")


def test_no_query_or_form_makes_the_page_fail(session_id, barista):
    row = open_request(session_id)
    as_barista = client_for(barista)
    for query in (
        "offset=99999999999999999999999",
        "offset=-3",
        "offset=x",
        "view=nope",
        "request=\x00",
    ):
        assert as_barista.get(f"/approvals/?{query}").status_code == 200
    for form in (
        {"decision": "approve", "fingerprint": row.fingerprint, "arg__quantity": "1e999"},
        {"decision": "approve", "fingerprint": row.fingerprint, "arg__product": "a\x00b"},
        {"decision": "nope", "fingerprint": "\x00"},
        {},
    ):
        response = as_barista.post(f"/approvals/{row.pk}/decide", form)
        assert response.status_code in (400, 409), (form, response.status_code)
    assert as_barista.get("/approvals/link/not-a-token").status_code == 404
