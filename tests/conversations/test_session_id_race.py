"""Users racing for one session id all get it (ids are per owner), and only one of them
holds it as the global id; one user racing with themselves gets it once."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from gloveapp.conversations.models import Session
from gloveapp.conversations.services import DuplicateSession, session_create
from tests.helpers import run_in_threads

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_it_gives_every_user_racing_for_one_id_a_session_of_their_own():
    users = [get_user_model().objects.create_user(f"racer{n}") for n in range(8)]

    results = run_in_threads(
        len(users), lambda n: session_create(owner=users[n], session_id="glove_race")
    )

    assert [type(result) for result in results] == [Session] * len(users)
    rows = Session.objects.filter(key="glove_race")
    assert rows.count() == len(users)
    assert rows.filter(pk="glove_race").count() == 1
    assert len(set(rows.values_list("pk", flat=True))) == len(users)


def test_it_gives_one_user_racing_with_themselves_the_id_once():
    user = get_user_model().objects.create_user("twin")

    results = run_in_threads(6, lambda _: session_create(owner=user, session_id="glove_twin"))

    assert sorted(type(result).__name__ for result in results) == ["DuplicateSession"] * 5 + [
        "Session"
    ]
    assert all(
        str(result) == 'You already have, or had, a session with id "glove_twin".'
        for result in results
        if isinstance(result, DuplicateSession)
    )
