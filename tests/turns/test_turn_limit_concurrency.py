"""GLOVE_TURNS_PER_USER_PER_MINUTE holds when one user posts to many chats at once: the count
is the user's and so is the lock (34 were accepted for 30 when the lock was the session's)."""

from __future__ import annotations

import pytest

from gloveapp.conversations.models import Session
from gloveapp.turns.models import Turn
from gloveapp.turns.submit import TurnLimitReached, turn_submit
from tests.helpers import run_in_threads

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

LIMIT = 10
POSTS = 40


@pytest.mark.postgres
def test_concurrent_posts_to_different_chats_never_pass_the_users_limit(
    settings, django_user_model
):
    settings.GLOVE_TURNS_PER_USER_PER_MINUTE = LIMIT
    settings.GLOVE_MAX_QUEUED_MESSAGES = POSTS
    owner = django_user_model.objects.create_user("hasty")
    sessions = [
        Session.objects.create(id=f"limit-{n}", key=f"limit-{n}", owner=owner, title="x")
        for n in range(POSTS)
    ]

    def post(index: int) -> str:
        try:
            turn_submit(session_id=sessions[index].pk, text="hi", user_id=owner.pk)
        except TurnLimitReached:
            return "refused"
        return "accepted"

    outcomes = run_in_threads(POSTS, post)

    assert outcomes.count("accepted") == LIMIT, outcomes
    assert outcomes.count("refused") == POSTS - LIMIT
    assert Turn.objects.filter(user=owner).count() == LIMIT
