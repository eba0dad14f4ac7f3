"""Publishing through a person: the draft waits on an approval in /approvals/, with its
replay report linked, and is published once someone approves it."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from gloveapp.approvals.models import ApprovalRequest
from gloveapp.versions.models import AgentPointer, PublishRequest, ReplayRun
from gloveapp.versions.promotion import publish_requests_settle
from gloveapp.versions.runs import replay_run_create, replay_run_execute
from gloveapp.versions.services import version_draft, version_publish
from tests.fakes import replay_model
from tests.versions.conftest import recorded

pytestmark = pytest.mark.django_db
AGENT_PAGE = "/admin/versions/agentpointer/shop/change/"


@pytest.fixture
def author(staff) -> Client:
    client = Client()
    client.force_login(staff)
    return client


@pytest.fixture
def approver(db) -> Client:
    person = get_user_model().objects.create_user("ada", password="pw-ada-1", is_staff=True)
    client = Client()
    client.force_login(person)
    return client


@pytest.fixture
def draft_with_report(scripted_shop, customer) -> ReplayRun:
    ids = recorded(customer, 5)
    version_publish(version=version_draft(agent_name="shop", system_prompt=replay_model.PROMPT))
    draft = version_draft(agent_name="shop", system_prompt=replay_model.PROMPT + "\nBe brief.")
    AgentPointer.objects.filter(pk="shop").update(publish_needs_approval=True)
    run = replay_run_create(version=draft, session_ids=ids, selection="ids")
    return replay_run_execute(run.pk)


def ask_to_publish(author: Client, run: ReplayRun) -> ApprovalRequest:
    response = author.post(AGENT_PAGE, {"action": "publish", "replay_run": str(run.pk)})
    assert response.status_code == 302
    return ApprovalRequest.objects.get()


def test_it_asks_for_an_approval_with_the_report_linked(author, approver, draft_with_report):
    approval = ask_to_publish(author, draft_with_report)

    assert AgentPointer.objects.get().published.number == 1  # nothing moved yet
    assert approval.args["replay_report"] == (
        f"/admin/versions/replayrun/{draft_with_report.pk}/change/"
    )
    page = approver.get(f"/approvals/{approval.pk}").content.decode()
    assert approval.args["replay_report"] in page and "0 of 5 conversations diverged" in page


def test_it_publishes_once_a_person_approves(author, approver, draft_with_report):
    approval = ask_to_publish(author, draft_with_report)

    decided = approver.post(
        f"/approvals/{approval.pk}/decide",
        {"decision": "approve", "fingerprint": approval.fingerprint},
    )
    assert decided.status_code in (200, 302)
    author.get(AGENT_PAGE)  # the page settles what was decided (the sweep does too)

    pointer = AgentPointer.objects.get()
    assert pointer.published.number == 2
    assert PublishRequest.objects.get().state == "published"
    assert publish_requests_settle() == 0  # once


def test_it_publishes_nothing_when_the_person_refuses(author, approver, draft_with_report):
    approval = ask_to_publish(author, draft_with_report)

    approver.post(
        f"/approvals/{approval.pk}/decide",
        {"decision": "reject", "fingerprint": approval.fingerprint, "reason": "not yet"},
    )
    publish_requests_settle()

    assert AgentPointer.objects.get().published.number == 1
    assert PublishRequest.objects.get().state == "rejected"


def test_the_person_who_asked_may_not_approve_it(author, approver, draft_with_report):
    approval = ask_to_publish(author, draft_with_report)

    page = author.get(f"/approvals/{approval.pk}").content.decode()
    decided = author.post(
        f"/approvals/{approval.pk}/decide",
        {"decision": "approve", "fingerprint": approval.fingerprint},
    )
    publish_requests_settle()

    assert "You asked for this: someone else decides it." in page
    assert 'value="approve"' not in page
    assert decided.status_code == 403
    assert "someone else must decide what you asked for" in decided.content.decode()
    approval.refresh_from_db()
    assert approval.status == "open" and approval.requested_by.username == "sam"
    assert AgentPointer.objects.get().published.number == 1
    assert 'value="approve"' in approver.get(f"/approvals/{approval.pk}").content.decode()


def test_a_setting_lets_the_person_who_asked_approve_it(author, draft_with_report, settings):
    settings.GLOVE_APPROVAL_SELF_APPROVAL = True
    approval = ask_to_publish(author, draft_with_report)

    decided = author.post(
        f"/approvals/{approval.pk}/decide",
        {"decision": "approve", "fingerprint": approval.fingerprint},
    )
    publish_requests_settle()

    assert decided.status_code in (200, 302)
    assert AgentPointer.objects.get().published.number == 2
