"""Inbox items an agent posts may declare decisions (approve, reject, respond): a person
decides, the decision is recorded, the agent reads a clear text; Glove's text resolution
stays as it was."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from gloveapp.core import CompactionConfig, Glove, ScriptedModel
from gloveapp.core.approvals.decisions import DecisionRefused
from gloveapp.core.builtin_tools import INBOX_TOOL_NAME, create_inbox_tool
from gloveapp.core.types import InboxItem as CoreInboxItem
from gloveapp.core.types import Message, ToolCall
from gloveapp.ormstore.store import DjangoStore
from inbox.models import InboxItem
from inbox.services import inbox_item_resolve
from tests.helpers import snapshot

pytestmark = [pytest.mark.postgres]

URL = "/api/inbox/resolve"
DECIDE = ("approve", "reject", "respond")


@pytest.fixture
def staff_client() -> APIClient:
    staff = get_user_model().objects.create_user("barista", is_staff=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=staff).key}")
    client.user = staff
    return client


def post(item_id: str, decisions: tuple[str, ...] | None = DECIDE) -> InboxItem:
    from inbox.services import inbox_item_add

    return inbox_item_add(
        session_id="coffee_session",
        item=CoreInboxItem(
            id=item_id, tag="refund", request="Refund order 42?", decisions=decisions
        ),
    )


def test_the_wire_form_is_glove_s_unless_an_item_declares_decisions():
    assert "decisions" not in CoreInboxItem(id="i", tag="t", request="r").to_dict()
    declared = CoreInboxItem(id="i", tag="t", request="r", decisions=("approve", "reject"))
    assert declared.to_dict()["decisions"] == ["approve", "reject"]
    assert CoreInboxItem.from_dict(declared.to_dict()).decisions == ("approve", "reject")
    with pytest.raises(DecisionRefused):
        create_inbox_tool(decisions=["edit"])  # an inbox item has no arguments to edit
    assert create_inbox_tool().json_schema == create_inbox_tool(decisions=DECIDE).json_schema


@pytest.mark.django_db
def test_staff_approve_over_rest_and_the_decision_is_recorded(staff_client):
    post("inbox_1_refund")

    answer = staff_client.post(
        URL, {"itemId": "inbox_1_refund", "decision": "approve"}, format="json"
    )

    assert answer.status_code == 200, answer.content
    assert answer.json() == {"ok": True, "itemId": "inbox_1_refund"}
    row = InboxItem.objects.get(pk="inbox_1_refund")
    assert (row.status, row.decision, row.response, row.resolved_by) == (
        "resolved",
        "approve",
        "Approved.",
        "api",
    )
    assert row.resolved_by_user == staff_client.user


@pytest.mark.django_db
def test_a_decision_the_item_does_not_allow_is_a_400_naming_the_field(staff_client):
    post("inbox_1_plain", decisions=None)  # today's item: a text response only
    post("inbox_2_gate", decisions=("approve", "reject"))
    before = snapshot()

    refused = [
        staff_client.post(URL, {"itemId": "inbox_1_plain", "decision": "approve"}, format="json"),
        staff_client.post(URL, {"itemId": "inbox_2_gate", "response": "ok then"}, format="json"),
        staff_client.post(URL, {"itemId": "inbox_2_gate", "decision": "edit"}, format="json"),
        staff_client.post(URL, {"itemId": "inbox_2_gate", "decision": 7}, format="json"),
        staff_client.post(
            URL,
            {"itemId": "inbox_2_gate", "decision": "approve", "response": "x"},
            format="json",
        ),
    ]

    assert [answer.status_code for answer in refused] == [400] * 5
    assert [answer.json()["field"] for answer in refused] == [
        "decision",
        "decision",
        "decision",
        "decision",
        "response",
    ]
    assert "allowed: respond" in refused[0].json()["error"]
    assert snapshot() == before
    missing = staff_client.post(URL, {"itemId": "nope", "decision": "approve"}, format="json")
    assert missing.status_code == 404


@pytest.mark.django_db
def test_reject_and_respond_through_the_service_and_plain_text_is_unchanged(staff_client):
    post("inbox_1_reject")
    post("inbox_2_respond")
    post("inbox_3_plain", decisions=None)

    rejected = inbox_item_resolve(
        item_id="inbox_1_reject", decision="reject", reason="over the limit", resolved_by="webhook"
    )
    responded = inbox_item_resolve(
        item_id="inbox_2_respond", decision="respond", response="Refund half of it."
    )
    plain = staff_client.post(URL, {"itemId": "inbox_3_plain", "response": "Done"}, format="json")

    assert (rejected.decision, rejected.response) == ("reject", "Rejected: over the limit")
    assert (responded.decision, responded.response) == ("respond", "Refund half of it.")
    assert plain.status_code == 200
    row = InboxItem.objects.get(pk="inbox_3_plain")
    assert (row.response, row.decision) == ("Done", "respond")
    with pytest.raises(DecisionRefused) as refused:
        post("inbox_4_respond")
        inbox_item_resolve(item_id="inbox_4_respond", decision="respond")
    assert refused.value.field == "response"
    again = staff_client.post(
        URL, {"itemId": "inbox_1_reject", "decision": "approve"}, format="json"
    )
    assert again.status_code == 409


@pytest.mark.django_db(transaction=True)
async def test_the_agent_posts_a_gated_item_and_reads_the_rejection():
    store = DjangoStore("refund_session")
    model = ScriptedModel(
        [
            Message(
                sender="agent",
                text="",
                tool_calls=[
                    ToolCall(INBOX_TOOL_NAME, {"tag": "refund", "request": "Refund order 42?"})
                ],
            ),
            "I asked a manager.",
            "The refund was rejected.",
        ]
    )
    glove = Glove(
        store=store,
        model=model,
        compaction_config=CompactionConfig(compaction_instructions="Summarize."),
    )
    glove.unfold(INBOX_TOOL_NAME)
    glove.fold(create_inbox_tool(decisions=("approve", "reject"))).build()

    await glove.process_request("Refund my order 42, please.")
    (item,) = await store.get_inbox_items()
    assert item.decisions == ("approve", "reject")

    from inbox.services import ainbox_item_resolve

    await ainbox_item_resolve(item_id=item.id, decision="reject", reason="It was delivered.")
    await glove.process_request("Any news?")

    prompt = "\n".join(m.text for m in model.calls[-1].messages)
    assert '-> Response: "Rejected: It was delivered."' in prompt


@pytest.mark.django_db
def test_staff_reject_an_item_with_a_reason_in_the_admin():
    staff = get_user_model().objects.create_superuser("boss", password="pw-boss-1")
    client = Client()
    client.force_login(staff)
    post("inbox_1_admin")
    url = "/admin/inbox/inboxitem/inbox_1_admin/change/"
    assert 'name="decide"' in client.get(url).content.decode()

    answer = client.post(url, {"decide": "reject", "resolution": "No.", "_save": "Save"})

    assert answer.status_code == 302
    row = InboxItem.objects.get(pk="inbox_1_admin")
    assert (row.decision, row.response, row.resolved_by) == ("reject", "Rejected: No.", "user")
    assert row.resolved_by_user == staff
    post("inbox_2_admin", decisions=("approve", "reject"))
    plain = client.post(
        "/admin/inbox/inboxitem/inbox_2_admin/change/",
        {"resolution": "sure", "_save": "Save"},
        follow=True,
    )
    assert plain.status_code == 200 and "asks for a decision" in plain.content.decode()
    assert InboxItem.objects.get(pk="inbox_2_admin").status == "pending"


@pytest.mark.django_db
def test_an_item_posted_over_the_session_rest_store_keeps_its_decisions(staff_client):
    created = staff_client.post("/api/sessions", {"sessionId": "rest_session"}, format="json")
    assert created.status_code == 201, created.content
    item = {"id": "inbox_9_rest", "tag": "refund", "request": "Refund?", "decisions": ["approve"]}

    added = staff_client.post("/api/sessions/rest_session/inbox", {"item": item}, format="json")
    bad = staff_client.post(
        "/api/sessions/rest_session/inbox",
        {"item": {**item, "id": "inbox_10_rest", "decisions": ["edit"]}},
        format="json",
    )
    listed = staff_client.get("/api/sessions/rest_session/inbox").json()

    assert added.status_code == 201, added.content
    assert bad.status_code == 400
    assert [entry.get("decisions") for entry in listed] == [["approve"]]
    row = InboxItem.objects.get(key="inbox_9_rest")
    answer = staff_client.post(URL, {"itemId": row.pk, "response": "ok"}, format="json")
    assert answer.status_code == 400 and answer.json()["field"] == "decision"


def _documented_examples(marker: str) -> list[list[str]]:
    """The rows of the table after `<!-- examples: {marker} ... -->` in the REST reference,
    each a list of its cells with their backticks taken off."""
    text = (Path(__file__).resolve().parents[2] / "docs/reference/rest-api.md").read_text()
    after = text.split(f"<!-- examples: {marker} ", 1)[1].split("-->", 1)[1].lstrip()
    lines = itertools.takewhile(lambda line: line.startswith("|"), after.splitlines())
    rows = [[cell.strip().strip("`") for cell in line.strip("|").split(" | ")] for line in lines]
    return rows[2:]  # past the header and its rule


@pytest.mark.django_db
def test_the_rest_references_accepted_bodies_resolve_as_documented(staff_client):
    rows = _documented_examples("inbox resolve accepted")
    assert len(rows) >= 6

    for number, (body, _declared, reads) in enumerate(rows):
        item_id = f"inbox_doc_{number}"
        post(item_id)  # declares approve, reject and respond
        sent = {**json.loads(body), "itemId": item_id}
        answer = staff_client.post(URL, sent, format="json")

        assert answer.status_code == 200, (body, answer.content)
        assert answer.json() == {"ok": True, "itemId": item_id}
        assert InboxItem.objects.get(pk=item_id).response == reads, body


@pytest.mark.django_db
def test_the_rest_references_refused_bodies_are_refused_as_documented(staff_client):
    rows = _documented_examples("inbox resolve refused")
    assert len(rows) >= 8

    for number, (body, answer_text, field) in enumerate(rows):
        sent = json.loads(body)
        if sent["itemId"] == "inbox_1":
            sent["itemId"] = f"inbox_doc_{number}"
            post(sent["itemId"], decisions=("approve", "reject"))
        before = snapshot()
        answer = staff_client.post(URL, sent, format="json")

        status, _, said = answer_text.partition(" ")
        assert answer.status_code == int(status.rstrip(":")), (body, answer.content)
        assert answer.json().get("field") == (None if field == "none" else field), body
        said = said.removeprefix(": ").strip("`")
        if not said.startswith("{"):
            assert said in answer.json()["error"], body
        assert snapshot() == before, body
