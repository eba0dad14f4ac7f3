"""A prompt's answer comes from a form anyone signed in can post: no input is a 500."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.mark.parametrize(
    ("slot_id", "form", "status"),
    [
        ("t1-slot_1", {"json": "1" * 5000}, 400),  # int() refuses 4,300+ digits
        ("t1-slot_1", {"json": "NaN"}, 400),
        ("t1-slot_1", {"json": '"\\ud800"'}, 400),
        ("t1-slot_1", {"json": '{"note": "a\\u0000b"}'}, 400),
        ("t1-slot_1", {"json": "[" * 5000}, 400),
        ("t²-slot_1", {"value": "once"}, 404),  # "²".isdigit() is true, int("²") is not
        ("t" + "9" * 30 + "-slot_1", {"value": "once"}, 404),
        ("t1-" + "s" * 500, {"value": "once"}, 404),
        ("slot_1", {"value": "once"}, 404),
    ],
)
def test_it_answers_a_hostile_slot_answer_with_a_4xx(owner_client, session, slot_id, form, status):
    response = owner_client.post(f"/sessions/{session.pk}/slots/{slot_id}", form)

    assert response.status_code == status
