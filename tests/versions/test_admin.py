"""Staff edit an agent's draft, read its diff, replay it, read the report, publish and roll
back, all in the admin."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.test import Client

from gloveapp.versions.models import AgentPointer, ReplayRun, VersionPublication
from tests.fakes import replay_model
from tests.versions.conftest import mentions, recorded

pytestmark = pytest.mark.django_db
AGENT_PAGE = "/admin/versions/agentpointer/shop/change/"
CHANGED = replay_model.PROMPT + '\nwhen "refund" reply "Refunds take 5 days."'


@pytest.fixture
def admin_client(staff) -> Client:
    client = Client()
    client.force_login(staff)
    return client


def save_draft(client: Client, prompt: str, note: str = "", budgets: str = "[]") -> None:
    response = client.post(
        AGENT_PAGE,
        {
            "action": "draft",
            "system_prompt": prompt,
            "model": "",
            "model_settings": "{}",
            "tools": "null",
            "mcp_servers": "null",
            "approval_policies": "{}",
            "budgets": budgets,
            "note": note,
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]


def test_it_starts_an_agents_versions_from_the_code(scripted_shop, admin_client):
    listing = admin_client.get("/admin/versions/agentpointer/").content.decode()
    assert "/admin/versions/agentpointer/start/shop/" in listing

    admin_client.get("/admin/versions/agentpointer/start/shop/")
    page = admin_client.get(AGENT_PAGE).content.decode()

    assert "the code (no version published)" in page
    assert "You are the shop&#x27;s assistant." in page  # the draft starts from the code


def test_it_shows_the_drafts_diff_against_the_published_version(scripted_shop, admin_client):
    admin_client.get("/admin/versions/agentpointer/start/shop/")
    save_draft(admin_client, replay_model.PROMPT, "as the code")
    admin_client.post(AGENT_PAGE, {"action": "publish"})
    save_draft(admin_client, CHANGED, "answer refunds")

    page = admin_client.get(AGENT_PAGE).content.decode()

    assert "+when &quot;refund&quot; reply &quot;Refunds take 5 days.&quot;" in page
    assert "--- shop v1 (published)" in page and "+++ shop v2" in page


def test_staff_put_a_budget_in_a_draft_and_read_it_in_the_diff(scripted_shop, admin_client):
    admin_client.get("/admin/versions/agentpointer/start/shop/")
    save_draft(admin_client, replay_model.PROMPT, "as the code")
    admin_client.post(AGENT_PAGE, {"action": "publish"})
    cap = '[{"id": "daily", "scope": "user", "window": "day", "cap_usd": "0.50"}]'

    save_draft(admin_client, replay_model.PROMPT, "a daily cap", budgets=cap)
    page = admin_client.get(AGENT_PAGE).content.decode()

    assert AgentPointer.objects.get().draft.budgets == [
        {"id": "daily", "scope": "user", "window": "day", "cap_usd": "0.50"}
    ]
    assert "## budgets" in page and "+    &quot;cap_usd&quot;: &quot;0.50&quot;," in page


def test_it_publishes_and_rolls_back_by_moving_the_pointer(scripted_shop, admin_client, staff):
    admin_client.get("/admin/versions/agentpointer/start/shop/")
    save_draft(admin_client, replay_model.PROMPT)
    admin_client.post(AGENT_PAGE, {"action": "publish"})
    save_draft(admin_client, CHANGED)
    admin_client.post(AGENT_PAGE, {"action": "publish"})
    pointer = AgentPointer.objects.select_related("published").get()
    assert pointer.published.number == 2

    admin_client.post(AGENT_PAGE, {"action": "rollback"})

    pointer.refresh_from_db()
    assert pointer.published.number == 1 and pointer.draft.number == 2
    moves = list(VersionPublication.objects.order_by("id").values_list("kind", "by"))
    assert moves == [("published", staff.pk), ("published", staff.pk), ("rolled_back", staff.pk)]


def test_it_refuses_a_publish_when_someone_moved_the_pointer(scripted_shop, admin_client):
    admin_client.get("/admin/versions/agentpointer/start/shop/")
    save_draft(admin_client, replay_model.PROMPT)
    admin_client.post(AGENT_PAGE, {"action": "publish"})
    save_draft(admin_client, CHANGED)

    response = admin_client.post(AGENT_PAGE, {"action": "publish", "published": "999"}, follow=True)

    assert "changed meanwhile" in response.content.decode()
    assert AgentPointer.objects.get().published.number == 1


def test_it_replays_twenty_conversations_and_shows_the_report(
    scripted_shop, admin_client, customer, django_capture_on_commit_callbacks
):
    ids = recorded(customer, 20)
    admin_client.get("/admin/versions/agentpointer/start/shop/")
    save_draft(admin_client, CHANGED)
    admin_client.post(AGENT_PAGE, {"action": "checks", "checks": 'never_says "5 days"'})

    with django_capture_on_commit_callbacks(execute=True):
        started = admin_client.post(AGENT_PAGE, {"action": "replay", "sample": "20"})
    run = ReplayRun.objects.get()
    assert started["Location"] == f"/admin/versions/replayrun/{run.pk}/change/"
    assert run.status == "queued" and run.total == 20 and run.task_id
    # The worker's part (the task it was handed), run here.
    call_command("replay_agent", "shop", "--resume", str(run.pk), stdout=open("/dev/null", "w"))

    report = admin_client.get(started["Location"]).content.decode()
    affected = mentions(ids, "refund")
    assert f"<strong data-diverged>{len(affected)}</strong>" in report
    assert f"<strong data-identical>{20 - len(affected)}</strong>" in report
    for session_id in ids:
        assert (f'data-result="{session_id}"' in report) == (session_id in affected)
    assert "Refunds take 5 days." in report and "never_says &quot;5 days&quot;" in report


def test_it_shows_outsiders_nothing(scripted_shop, customer):
    client = Client()
    client.force_login(customer)
    assert client.get(AGENT_PAGE).status_code == 302
    assert client.get("/admin/versions/replayrun/1/change/").status_code == 302


@pytest.mark.parametrize(
    "field, value",
    [
        ("approval_policies", '{"check_stock": {"decisions": ["maybe"]}}'),
        ("approval_policies", '{"check_stock": {"colour": "red"}}'),
        ("tools", '{"not": "a list"}'),
        ("model_settings", "[1, 2]"),
        ("model_settings", "{not json"),
        ("budgets", '{"not": "a list"}'),
        ("budgets", "[null]"),
        ("budgets", '[{"id": "daily", "scope": "user", "window": "day"}]'),
        (
            "budgets",
            '[{"id": "d", "scope": "agent", "target": "coffee", "window": "day", "cap_usd": "1"}]',
        ),
    ],
)
def test_it_refuses_a_draft_it_could_not_run(scripted_shop, admin_client, field, value):
    admin_client.get("/admin/versions/agentpointer/start/shop/")
    fields = {
        "action": "draft",
        "system_prompt": "x",
        "model_settings": "{}",
        "tools": "null",
        "mcp_servers": "null",
        "approval_policies": "{}",
        field: value,
    }

    response = admin_client.post(AGENT_PAGE, fields)

    assert response.status_code == 200 and "errorlist" in response.content.decode()
    assert AgentPointer.objects.get().draft is None


def test_it_answers_404_for_what_does_not_exist(admin_client, scripted_shop):
    assert admin_client.get("/admin/versions/agentpointer/nobody/change/").status_code == 404
    assert (
        admin_client.get("/admin/versions/replayrun/99999999999999999999/change/").status_code
        == 404
    )
    assert admin_client.get("/admin/versions/agentpointer/start/nobody/").status_code == 403


@pytest.mark.parametrize(
    "fields",
    [
        {"ids": "bad\x00id"},
        {"ids": "x" * 5000},
        {"filter": "q=\x00"},
        {"filter": "turn_count__gt=99999999999999999999999"},
        {"filter": "no_such_field=1"},
        {"sample": "-3"},
    ],
)
def test_it_refuses_a_replay_of_what_it_cannot_read_without_an_error(
    scripted_shop, admin_client, customer, fields
):
    recorded(customer, 2)
    admin_client.get("/admin/versions/agentpointer/start/shop/")
    save_draft(admin_client, replay_model.PROMPT)

    response = admin_client.post(AGENT_PAGE, {"action": "replay", **fields})

    assert response.status_code == 200 and "errorlist" in response.content.decode()
    assert not ReplayRun.objects.exists()
