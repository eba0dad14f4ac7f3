"""Many staff claim one queued chat at once, on PostgreSQL: exactly one wins; every other
claimant is told who did, and the audit holds one claim."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from gloveapp.conversations import handoff
from gloveapp.conversations.models import HandoffRecord, Session
from gloveapp.conversations.services import session_create
from tests.helpers import run_in_threads

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

CLAIMANTS = 12


def test_it_gives_a_chat_to_exactly_one_of_many_claimants(obedient, customer):
    baristas = Group.objects.get_or_create(name="baristas")[0]
    staff = []
    for index in range(CLAIMANTS):
        user = get_user_model().objects.create_user(
            f"barista{index}", first_name=f"B{index}", is_staff=True
        )
        user.groups.add(baristas)
        staff.append(user)
    chat = session_create(owner=customer, agent_name="obedient", title="Race")
    handoff.handoff_request(
        session_id=chat.pk, actor=handoff.Actor(user=customer), via="api", group="baristas"
    )

    def claim(index: int):
        return handoff.handoff_claim(session_id=chat.pk, staff=staff[index])

    outcomes = run_in_threads(CLAIMANTS, claim)
    won = [o for o in outcomes if isinstance(o, Session)]
    lost = [o for o in outcomes if isinstance(o, handoff.HandoffConflict)]
    assert len(won) == 1 and len(lost) == CLAIMANTS - 1, outcomes
    winner = Session.objects.get(pk=chat.pk).answerer_person
    assert all(conflict.current["person"] == winner.first_name for conflict in lost)
    assert HandoffRecord.objects.filter(session=chat, kind="claimed").count() == 1
