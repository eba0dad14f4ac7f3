"""Declaring budgets and reading their spend: the admin (staff only, no 5xx from any form),
GLOVE_BUDGETS (a system check names the fault), the usage page and `/metrics` (staff and
the scraper only), and the ledger's retention."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client
from django.utils import timezone

from gloveapp.budgets.applying import subject_for
from gloveapp.budgets.models import Budget, BudgetCounter, BudgetReservation
from gloveapp.budgets.services import (
    budget_ledger_prune,
    budget_reserve,
    budget_settle,
)
from gloveapp.turns.retention import retention_apply
from tests.budgets.conftest import budget

pytestmark = [pytest.mark.django_db]

FORM = {
    "key": "daily-team",
    "name": "The team's day",
    "scope": "everyone",
    "target": "",
    "window": "day",
    "cap_usd": "2.50",
    "cap_tokens": "",
    "cap_turns": "",
    "action": "refuse",
    "active": "on",
}


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def admin_user(db):
    return get_user_model().objects.create_user(
        "ada", password="pw-ada-1", is_staff=True, is_superuser=True
    )


@pytest.fixture
def outsider(db):
    return get_user_model().objects.create_user("olaf", password="pw-olaf-1")


@pytest.fixture
def plain_staff(db):
    """Staff without any permission on budgets."""
    return get_user_model().objects.create_user("pat", password="pw-pat-1", is_staff=True)


def test_staff_declare_a_budget_in_the_admin(admin_user):
    response = client_for(admin_user).post("/admin/budgets/budget/add/", FORM)

    assert response.status_code == 302, response.content.decode()[:2000]
    made = Budget.objects.get(key="daily-team")
    assert made.cap_usd == Decimal("2.50") and made.action == "refuse"


def test_outsiders_cannot_read_or_change_budgets(outsider, plain_staff, admin_user):
    budget("secret-cap", cap_usd="1")
    made = Budget.objects.get(key="secret-cap")
    pages = [
        "/admin/budgets/budget/",
        f"/admin/budgets/budget/{made.pk}/change/",
        "/admin/budgets/budgetcounter/",
        "/admin/budgets/budgetreservation/",
        "/admin/usage/",
    ]
    for user in (None, outsider):
        client = client_for(user) if user else Client()
        for page in pages:
            answer = client.get(page)
            assert answer.status_code == 302 and "/login/" in answer["Location"], page
        assert client.post("/admin/budgets/budget/add/", FORM).status_code == 302
    staff = client_for(plain_staff)
    for page in pages:
        assert staff.get(page).status_code == 403, page
    assert staff.post("/admin/budgets/budget/add/", FORM).status_code == 403
    assert (
        staff.post(f"/admin/budgets/budget/{made.pk}/delete/", {"post": "yes"}).status_code == 403
    )
    assert Budget.objects.filter(key="secret-cap").exists()
    assert not Budget.objects.filter(key="daily-team").exists()
    assert client_for(admin_user).get("/admin/budgets/budget/").status_code == 200


@pytest.mark.parametrize(
    "changes",
    [
        {"key": "a b"},
        {"key": "x\x00y"},
        {"key": "k" * 500},
        {"key": "turns-per-minute"},
        {"scope": "planet"},
        {"window": "century"},
        {"action": "explode"},
        {"cap_usd": "-1"},
        {"cap_usd": "1e400"},
        {"cap_usd": "NaN"},
        {"cap_usd": "9" * 40},
        {"cap_usd": "", "cap_tokens": "", "cap_turns": ""},
        {"cap_tokens": "-5"},
        {"cap_tokens": "99999999999999999999999999"},
        {"cap_turns": "3.5"},
        {"target": "someone"},
        {"target": "t" * 1000},
        {"name": "\x00"},
    ],
)
def test_a_hostile_form_is_refused_in_place_never_a_5xx(admin_user, changes):
    response = client_for(admin_user).post("/admin/budgets/budget/add/", {**FORM, **changes})

    assert response.status_code == 200, changes
    assert "errornote" in response.content.decode() or "errorlist" in response.content.decode()
    assert not Budget.objects.exists()


@pytest.mark.parametrize(
    "query",
    [
        "budgets_after=%00",
        "budgets_after=" + "z" * 5000,
        "days=-1&budgets_after=a",
        "days=abc",
    ],
)
def test_no_query_makes_the_usage_page_fail(admin_user, query):
    assert client_for(admin_user).get(f"/admin/usage/?{query}").status_code == 200


@pytest.mark.parametrize(
    "query",
    ["turn=abc", "turn=%00", "turn=" + "9" * 40, "budget=%00", "state=nope", "q=%00", "o=9"],
)
def test_no_filter_makes_the_ledger_lists_fail(admin_user, query):
    client = client_for(admin_user)
    for page in ("/admin/budgets/budgetreservation/", "/admin/budgets/budgetcounter/"):
        # A 4xx names what is wrong (a NUL is refused before any query), never a 5xx.
        assert client.get(f"{page}?{query}").status_code in (200, 302, 400), (page, query)


def test_the_usage_page_shows_spend_against_each_budget(admin_user):
    budget("team-day", cap_usd="2.00", name="The team's day")
    subject = subject_for(user_id=admin_user.pk, agent="spender", session_id="s1")
    held = budget_reserve(subject=subject, usd=Decimal("0.30"), tokens=100, model="m")
    budget_settle(held=held, usd=Decimal("0.25"), tokens=80)

    page = client_for(admin_user).get("/admin/usage/").content.decode()

    assert 'data-budget="team-day"' in page and "The team&#x27;s day" in page
    assert "$0.250000" in page and "$1.750000" in page  # spent, left
    assert 'data-budget="turns-per-minute"' in page  # the settings' budget


def test_metrics_have_spend_and_remaining_per_budget_id_only(admin_user, settings):
    settings.GLOVE_METRICS_TOKEN = "metrics-token-123"
    budget("team-day", cap_usd="2.00")
    subject = subject_for(user_id=admin_user.pk, agent="spender", session_id="s1")
    held = budget_reserve(subject=subject, usd=Decimal("0.30"), tokens=100, model="m")
    budget_settle(held=held, usd=Decimal("0.5"), tokens=80)

    body = (
        Client()
        .get("/metrics", headers={"Authorization": "Bearer metrics-token-123"})
        .content.decode()
    )
    outsider = Client().get("/metrics", headers={"Authorization": "Bearer wrong"})

    assert 'glove_budget_spend_usd{budget="team-day"} 0.5' in body
    assert 'glove_budget_remaining_usd{budget="team-day"} 1.5' in body
    assert "ada" not in [line.split("{")[0] for line in body.splitlines()]
    assert 'user="' not in body
    assert outsider.status_code == 401


def test_a_budget_in_the_settings_applies_and_a_wrong_one_is_a_system_check_error(
    settings, admin_user
):
    settings.GLOVE_BUDGETS = [{"id": "tiny", "scope": "user", "window": "month", "cap_usd": "0.01"}]
    subject = subject_for(user_id=admin_user.pk, agent="spender", session_id="s1")
    from gloveapp.budgets.services import BudgetExceeded

    with pytest.raises(BudgetExceeded) as refused:
        budget_reserve(subject=subject, usd=Decimal("0.05"), tokens=10, model="m")
    assert refused.value.budget == "tiny"

    for wrong in (
        [{"id": "x", "scope": "planet", "window": "day", "cap_usd": 1}],
        [{"id": "x", "scope": "user", "window": "day"}],
        [{"id": "x", "scope": "user", "window": "day", "cap_usd": "lots"}],
        [{"id": "x", "scope": "user", "window": "day", "cap_usd": 1, "colour": "red"}],
        {"id": "x"},
    ):
        settings.GLOVE_BUDGETS = wrong
        with pytest.raises(SystemCheckError, match=r"glove\.E060"):
            call_command("check")


def test_the_ledger_keeps_open_reservations_and_forgets_old_settled_ones(admin_user, settings):
    budget("team-day", cap_usd="100")
    subject = subject_for(user_id=admin_user.pk, agent="spender", session_id="s1")
    long_ago = timezone.now() - timedelta(days=100)
    old = budget_reserve(subject=subject, usd=Decimal("1"), tokens=1, model="m", now=long_ago)
    budget_settle(held=old, usd=Decimal("0.5"), tokens=1)
    still_open = budget_reserve(
        subject=subject, usd=Decimal("1"), tokens=1, model="m", now=long_ago
    )
    recent = budget_reserve(subject=subject, usd=Decimal("1"), tokens=1, model="m")
    budget_settle(held=recent, usd=Decimal("0.5"), tokens=1)
    settings.GLOVE_RETAIN_BUDGET_LEDGER_DAYS = 90

    pruned = retention_apply()

    kept = set(BudgetReservation.objects.values_list("pk", flat=True))
    assert pruned["budget ledger"] >= 1
    assert kept == {*still_open.ids, *recent.ids}
    # The old window's counter holds an open reservation: kept too.
    assert BudgetCounter.objects.filter(pk__in=still_open.counter_ids).exists()
    with pytest.raises(ValueError):
        budget_ledger_prune(older_than=timedelta(0))
