"""`Session.person_message_count`: kept by the append itself, equal to the real count of the
messages a person sent, whichever path wrote them."""

from __future__ import annotations

import pytest

from gloveapp.conversations import services
from gloveapp.conversations.models import PERSON_MESSAGE, Message, Session
from gloveapp.core.types import Message as CoreMessage
from gloveapp.core.types import TokenUsage, ToolResult, ToolResultData
from tests.helpers import run_in_threads

pytestmark = [pytest.mark.postgres]


def counted(session_id: str) -> int:
    return Session.objects.get(pk=session_id).person_message_count


def real(session_id: str) -> int:
    return Message.objects.filter(PERSON_MESSAGE, session_id=session_id).count()


MIXED = [
    CoreMessage(sender="user", text="An espresso, please."),
    CoreMessage(sender="agent", text="Coming up."),
    CoreMessage(
        sender="user",
        text="tool results",
        tool_results=[
            ToolResult(
                tool_name="brew", call_id="c1", result=ToolResultData(status="success", data=1)
            )
        ],
    ),
    CoreMessage(sender="user", text="[Inbox: 1 item resolved]", framework_context="inbox"),
    CoreMessage(sender="user", text="A skill", is_skill_injection=True),
    CoreMessage(sender="user", text="The customer ordered.", is_compaction=True),
    CoreMessage(sender="user", text=""),
    CoreMessage(sender="user", text="And a croissant."),
]


@pytest.mark.django_db
def test_it_counts_only_what_a_person_sent():
    services.session_create(session_id="s1")

    services.messages_append(session_id="s1", messages=MIXED)

    assert counted("s1") == real("s1") == 2


@pytest.mark.django_db
def test_it_counts_the_append_that_creates_the_session():
    services.messages_append(session_id="fresh", messages=MIXED[:2])

    assert counted("fresh") == real("fresh") == 1


@pytest.mark.django_db(transaction=True)
def test_it_counts_a_model_replys_record_in_its_one_statement():
    services.session_create(session_id="s2")
    services.messages_append(session_id="s2", messages=[MIXED[0]])

    services.turn_record(
        session_id="s2",
        messages=[CoreMessage(sender="agent", text="Done."), MIXED[-1]],
        usage=TokenUsage(tokens_in=3, tokens_out=4),
    )

    assert counted("s2") == real("s2") == 2


@pytest.mark.django_db
def test_compaction_keeps_the_count():
    services.session_create(session_id="s3")
    services.messages_append(session_id="s3", messages=MIXED)

    services.counters_reset(session_id="s3")
    services.messages_append(
        session_id="s3", messages=[CoreMessage(sender="user", text="sum", is_compaction=True)]
    )

    assert counted("s3") == real("s3") == 2


@pytest.mark.django_db
def test_a_refused_append_counts_nothing():
    services.session_create(session_id="s4")

    with pytest.raises(ValueError):
        services.messages_append(session_id="s4", messages=[MIXED[0], "not a message"])

    assert counted("s4") == real("s4") == 0


@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_count_every_message_once():
    services.session_create(session_id="busy")

    def append(worker: int) -> None:
        for n in range(10):
            services.messages_append(
                session_id="busy",
                messages=[
                    CoreMessage(sender="user", text=f"w{worker} r{n}"),
                    CoreMessage(sender="agent", text="ok"),
                ],
            )

    outcomes = run_in_threads(6, append)

    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    assert counted("busy") == real("busy") == Message.objects.filter(sender="user").count()


@pytest.mark.django_db
def test_a_retried_post_counts_once(django_user_model):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    owner = django_user_model.objects.create_user("owner")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=owner).key}")
    assert client.post("/api/sessions", {"sessionId": "mine"}, format="json").status_code == 201
    body = {"messages": [{"sender": "user", "text": "A cortado."}]}

    for _ in range(2):  # the client's retry of an acknowledged request
        response = client.post(
            "/api/sessions/mine/messages", body, format="json", HTTP_IDEMPOTENCY_KEY="k-1"
        )
        assert response.status_code == 200

    session = Session.objects.get(owner=owner, key="mine")
    assert counted(session.pk) == real(session.pk) == 1
