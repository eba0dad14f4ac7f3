"""The handoff's routes: the REST `POST /api/sessions/<id>/handoff`, the chat page's "Talk to a
person", the staff console at `/handoffs/` and its socket. Who may do what, what an outsider
learns (nothing: the same answer whether or not the chat exists), and no 5xx from any input.
"""

from __future__ import annotations

import json
import re

import pytest
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from gloveapp.asgi import application
from gloveapp.conversations import handoff
from gloveapp.conversations.models import HandoffRecord, Message, Session
from gloveapp.conversations.services import session_create
from gloveapp.live.models import LiveEvent
from gloveapp.live.streams import handoffs_stream
from tests.helpers import connection_cut_after_commit

pytestmark = pytest.mark.django_db

STAFF_ROUTES = ("claim", "take-over", "reply", "note", "hand-back", "close")


@pytest.fixture
def chat(obedient, customer) -> Session:
    return session_create(owner=customer, agent_name="obedient", title="Refund")


def _client(user=None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def _ask_over_rest(user, chat: Session, reason: str):
    return _client(user).post(
        f"/api/sessions/{chat.key}/handoff",
        data={"reason": reason},
        content_type="application/json",
    )


def test_it_hands_a_chat_to_its_agents_group_over_rest(chat, customer):
    answer = _ask_over_rest(customer, chat, "I want a refund")
    assert answer.status_code == 200, answer.content
    assert answer.json()["answerer"]["state"] == "queued"
    assert answer.json()["answerer"]["group"] == "baristas"
    record = HandoffRecord.objects.get(session=chat)
    assert (record.kind, record.actor, record.via, record.reason) == (
        "requested",
        customer,
        "api",
        "I want a refund",
    )
    assert _client(customer).get(f"/api/sessions/{chat.key}/handoff").json()["answerer"][
        "label"
    ] == ("This chat waits for a person from the baristas")


def test_a_second_handoff_is_a_409_naming_who_answers(chat, customer, bea):
    handoff.handoff_request(session_id=chat.pk, actor=handoff.Actor(user=customer), via="page")
    handoff.handoff_claim(session_id=chat.pk, staff=bea)
    answer = _client(customer).post(
        f"/api/sessions/{chat.key}/handoff",
        data={"reason": "again"},
        content_type="application/json",
    )
    assert answer.status_code == 409
    assert "Bea" in answer.json()["error"]
    assert answer.json()["answerer"]["person"] == "Bea"


def test_a_message_over_rest_while_a_person_answers_is_a_turn_done_at_once(chat, customer, bea):
    def post(text: str) -> dict:
        answer = _client(customer).post(
            f"/api/sessions/{chat.key}/agent/turns",
            data={"text": text},
            content_type="application/json",
        )
        assert answer.status_code == 202, answer.content
        return answer.json()

    handoff.handoff_request(session_id=chat.pk, actor=handoff.Actor(user=customer), via="page")
    queued = post("hello while queued")
    handoff.handoff_claim(session_id=chat.pk, staff=bea)
    answered = post("hello while a person answers")
    for started in (queued, answered):
        assert (started["state"], started["ahead"]) == ("done", 0)
        assert _client(customer).get(started["turnUrl"]).json()["state"] == "done"
    texts = chat.messages.filter(sender="user", framework_context=None)
    assert list(texts.order_by("seq").values_list("text", flat=True)) == [
        "hello while queued",
        "hello while a person answers",
    ]


@pytest.mark.parametrize(
    "body,field",
    [
        ({}, "reason"),
        ({"reason": ""}, "reason"),
        ({"reason": 12}, "reason"),
        ({"reason": "x" * 501}, "reason"),
        ({"reason": "ok", "group": "nobody-has-this"}, "group"),
        ({"reason": "ok", "group": ["baristas"]}, "group"),
        ({"reason": "a\x00b"}, "reason"),
    ],
)
def test_hostile_handoff_bodies_are_400s_naming_the_field(chat, customer, body, field):
    answer = _client(customer).post(
        f"/api/sessions/{chat.key}/handoff", data=json.dumps(body), content_type="application/json"
    )
    assert answer.status_code == 400, answer.content
    assert field in answer.content.decode()
    assert Session.objects.get(pk=chat.pk).answerer == "agent"


def test_outsiders_get_the_same_answer_from_the_rest_route(chat, other_customer, roaster):
    for user, expected in ((other_customer, 404), (None, 403)):
        client = _client(user)
        for session_id in (chat.key, "glove_nothing_here", "%00", "x" * 300):
            answer = client.post(
                f"/api/sessions/{session_id}/handoff",
                data={"reason": "hi"},
                content_type="application/json",
            )
            assert answer.status_code in (expected, 401) and answer.status_code < 500
    assert Session.objects.get(pk=chat.pk).answerer == "agent"


def test_a_customer_asks_for_a_person_on_the_chat_page(chat, customer):
    client = _client(customer)
    page = client.get(f"/sessions/{chat.key}/")
    assert b"Talk to a person" in page.content
    answer = client.post(f"/sessions/{chat.key}/handoff")
    assert answer.status_code == 302
    page = client.get(f"/sessions/{chat.key}/")
    assert b"This chat waits for a person from the baristas" in page.content
    assert b"Talk to a person" not in page.content
    assert client.post(f"/sessions/{chat.key}/handoff").status_code == 409


def test_a_barista_claims_replies_notes_and_hands_back_on_the_console(chat, customer, bea):
    handoff.handoff_request(
        session_id=chat.pk, actor=handoff.Actor(user=customer), via="page", group="baristas"
    )
    staff = _client(bea)
    console = staff.get("/handoffs/")
    assert console.status_code == 200
    assert b"Refund" in console.content and b"waiting" in console.content
    # Each group's socket resumes from its own stream's number (ids count per stream).
    [cursors] = re.findall(rb'data-last-event-ids="([^"]*)"', console.content)
    expected = LiveEvent.objects.filter(stream=handoffs_stream("baristas")).count()
    assert json.loads(cursors.replace(b"&quot;", b'"'))["baristas"] == expected > 0
    assert staff.post(f"/handoffs/{chat.pk}/claim").status_code == 302
    pane = staff.get(f"/handoffs/{chat.pk}?part=detail")
    assert b"Hand back to the agent" in pane.content
    staff.post(f"/handoffs/{chat.pk}/reply", {"text": "Bea here, sorting it."})
    staff.post(f"/handoffs/{chat.pk}/note", {"text": "secret: VIP"})
    customer_page = _client(customer).get(f"/sessions/{chat.key}/")
    assert b"Bea here, sorting it." in customer_page.content
    assert b"Bea from the baristas" in customer_page.content
    assert b"secret: VIP" not in customer_page.content
    history = _client(customer).get(f"/api/sessions/{chat.key}/messages")
    assert b"Bea here, sorting it." in history.content
    assert b"secret: VIP" not in history.content
    staff.post(f"/handoffs/{chat.pk}/hand-back", {"summary": "Refund sent"})
    assert Session.objects.get(pk=chat.pk).answerer == "agent"
    assert b"secret: VIP" in staff.get(f"/handoffs/{chat.pk}?part=detail").content


def test_a_second_claimant_gets_a_409_naming_the_winner(chat, customer, bea, bo):
    handoff.handoff_request(
        session_id=chat.pk, actor=handoff.Actor(user=customer), via="page", group="baristas"
    )
    assert _client(bea).post(f"/handoffs/{chat.pk}/claim").status_code == 302
    lost = _client(bo).post(f"/handoffs/{chat.pk}/claim")
    assert lost.status_code == 409
    assert b"Bea from the baristas answers this chat" in lost.content
    # Bo may read along but not reply or hand back a chat Bea holds.
    assert _client(bo).post(f"/handoffs/{chat.pk}/reply", {"text": "hi"}).status_code == 409


def test_staff_take_over_a_chat_the_agent_answers(chat, bea):
    assert _client(bea).post(f"/handoffs/{chat.pk}/take-over", {"reason": "VIP"}).status_code == 302
    session = Session.objects.get(pk=chat.pk)
    assert (session.answerer, session.answerer_person) == ("person", bea)


def test_outsiders_get_the_same_404_on_every_console_route(chat, customer, other_customer, roaster):
    handoff.handoff_request(
        session_id=chat.pk, actor=handoff.Actor(user=customer), via="page", group="baristas"
    )
    for user in (customer, other_customer, roaster):
        client = _client(user)
        for session_id in (chat.pk, "glove_nothing_here", "a" * 300, "%20"):
            assert client.get(f"/handoffs/{session_id}").status_code == 404
            for route in STAFF_ROUTES:
                answer = client.post(f"/handoffs/{session_id}/{route}", {"text": "x"})
                assert answer.status_code == 404, (user, session_id, route)
        if not user.is_staff:
            assert client.get("/handoffs/").status_code == 404
    anonymous = _client()
    for session_id in (chat.pk, "glove_nothing_here"):
        for route in STAFF_ROUTES:
            answer = anonymous.post(f"/handoffs/{session_id}/{route}")
            assert answer.status_code == 302 and "/login" in answer["Location"]
    assert Session.objects.get(pk=chat.pk).answerer == "queued"
    # Rita (the roasters) does not see the baristas' queue.
    assert b"Refund" not in _client(roaster).get("/handoffs/").content


def test_the_chat_pages_handoff_is_the_owners_alone(chat, other_customer, bea):
    for user in (other_customer, bea):
        for session_id in (chat.key, chat.pk, "glove_nothing_here"):
            assert _client(user).post(f"/sessions/{session_id}/handoff").status_code == 404
    assert Session.objects.get(pk=chat.pk).answerer == "agent"


@pytest.mark.parametrize(
    "query",
    ["?cursor=zzz", "?cursor=%00", "?view=nope", "?group=%00", "?group=" + "g" * 200, "?chat=%00"],
)
def test_hostile_console_queries_are_never_5xx(bea, query):
    assert _client(bea).get(f"/handoffs/{query}").status_code in (200, 400)


def test_hostile_console_bodies_are_4xx(chat, customer, bea):
    handoff.handoff_take_over(session_id=chat.pk, staff=bea)
    staff = _client(bea)
    for body in ({}, {"text": ""}, {"text": "x" * 10_001}, {"text": "a\x00b"}):
        assert staff.post(f"/handoffs/{chat.pk}/reply", body).status_code == 400
    assert (
        staff.post(f"/handoffs/{chat.pk}/hand-back", {"summary": "s" * 10_001}).status_code == 400
    )


def test_the_console_pages_the_queue_by_a_key(chat, customer, bea, obedient, settings):
    from gloveapp.conversations import handoff_selectors

    for index in range(handoff_selectors.PAGE_SIZE + 3):
        other = session_create(owner=customer, agent_name="obedient", title=f"Chat {index}")
        handoff.handoff_request(
            session_id=other.pk, actor=handoff.Actor(user=customer), via="api", group="baristas"
        )
    staff = _client(bea)
    first = staff.get("/handoffs/?view=waiting&group=baristas")
    assert first.content.count(b'class="inbox-row handoffs-row"') == handoff_selectors.PAGE_SIZE
    cursor = first.content.decode().split("cursor=")[1].split('"')[0]
    second = staff.get(f"/handoffs/?view=waiting&group=baristas&cursor={cursor}")
    assert second.content.count(b'class="inbox-row handoffs-row"') == 3
    assert b'baristas <span class="count">53</span>' in first.content


def _cookie(user) -> str:
    return f"sessionid={_client(user).cookies['sessionid'].value}"


@pytest.mark.django_db(transaction=True)
async def test_the_console_socket_is_for_the_groups_staff_and_carries_changes(
    obedient, customer, bea, roaster
):
    from channels.db import database_sync_to_async

    async def connect(user, path: str):
        cookie = await database_sync_to_async(_cookie)(user)
        communicator = WebsocketCommunicator(
            application,
            path,
            headers=[(b"origin", b"http://testserver"), (b"cookie", cookie.encode())],
        )
        return communicator, await communicator.connect(timeout=10)

    for user in (roaster, customer):
        refused, _ = await connect(user, "/ws/handoffs/baristas/")
        assert (await refused.receive_output(timeout=10))["code"] == 4404
    socket, (connected, _) = await connect(bea, "/ws/handoffs/baristas/")
    assert connected
    chat = await database_sync_to_async(session_create)(
        owner=customer, agent_name="obedient", title="Live"
    )
    await database_sync_to_async(handoff.handoff_request)(
        session_id=chat.pk, actor=handoff.Actor(user=customer), via="page", group="baristas"
    )
    frame = await socket.receive_json_from(timeout=10)
    assert frame["type"] == "handoff.changed"
    assert frame["payload"]["session"] == chat.pk
    assert frame["payload"]["answerer"]["state"] == "queued"
    await socket.disconnect()


@pytest.mark.django_db(transaction=True)
def test_handoffs_show_on_metrics(chat, customer, bea, settings):
    from tests.observe.test_metrics import TOKEN, samples, value

    settings.GLOVE_METRICS_TOKEN = TOKEN

    def scraped() -> dict:
        answer = Client().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        return samples(answer.content.decode())

    before = scraped()
    _client(customer).post(
        f"/api/sessions/{chat.key}/handoff", data={"reason": "hi"}, content_type="application/json"
    )
    _client(bea).post(f"/handoffs/{chat.pk}/claim")
    _client(bea).post(f"/handoffs/{chat.pk}/hand-back", {"summary": "done"})
    after = scraped()
    agent = {"gen_ai_agent_name": "obedient"}

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("glove_handoffs_total", via="api", **agent) == 1
    assert grew("glove_handoff_time_to_person_seconds_count", **agent) == 1
    assert grew("glove_handoff_hand_backs_total", **agent) == 1


def test_the_admins_session_page_shows_who_answers_and_the_audit(chat, customer, bea, admin_user):
    handoff.handoff_request(
        session_id=chat.pk, reason="wants a refund", actor=handoff.Actor(user=customer), via="api"
    )
    handoff.handoff_claim(session_id=chat.pk, staff=bea)
    page = _client(admin_user).get(f"/admin/conversations/session/{chat.pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Bea from the baristas answers this chat" in text
    assert "asked for a person by nora (api) · why: wants a refund" in text
    assert "claimed by Bea (console)" in text


def test_a_persons_reply_is_on_the_chats_stream_with_its_author(chat, bea):
    from gloveapp.live.models import LiveEvent
    from gloveapp.live.streams import session_stream

    handoff.handoff_take_over(session_id=chat.pk, staff=bea)
    handoff.staff_reply(session_id=chat.pk, staff=bea, text="Bea here")
    handoff.staff_note(session_id=chat.pk, staff=bea, text="secret: VIP")
    events = LiveEvent.objects.filter(stream=session_stream(chat.pk), type="message.appended")
    messages = [event.payload["message"] for event in events.order_by("id")]
    assert messages[-1]["sender"] == "agent" and messages[-1]["text"] == "Bea here"
    assert messages[-1]["author"]["label"] == "Bea from the baristas"
    assert not any("secret" in json.dumps(event.payload) for event in events)


def test_changes_of_who_answers_are_steps_of_the_staff_timeline(chat, customer, bea):
    def post(text: str) -> None:
        answer = _client(customer).post(
            f"/api/sessions/{chat.key}/agent/turns",
            data={"text": text},
            content_type="application/json",
        )
        assert answer.status_code == 202, answer.content

    post("hello")  # the agent's turn (no worker runs it here)
    handoff.handoff_request(session_id=chat.pk, actor=handoff.Actor(user=customer), via="page")
    handoff.handoff_claim(session_id=chat.pk, staff=bea)
    post("is this Bea?")  # a person's turn, done at once
    handoff.handoff_hand_back(session_id=chat.pk, staff=bea, summary="ok")

    body = _client(bea).get(f"/api/sessions/{chat.key}/timeline").json()
    changes = [
        [
            (step["name"], step["detail"]["to"])
            for step in turn["steps"]
            if step["kind"] == "answerer"
        ]
        for turn in body["turns"]
    ]
    assert changes == [[("handed_back", "agent")], [("requested", "queued"), ("claimed", "person")]]
    page = _client(bea).get(f"/sessions/{chat.key}/").content.decode()
    assert "Bea claimed the chat" in page
    assert "Bea handed the chat back to the agent" in page


def _chat_reads(queries) -> int:
    """How many statements read a chat's row (not the appends' UPDATE ... RETURNING)."""
    return sum(
        query["sql"].startswith("SELECT") and 'FROM "conversations_session"' in query["sql"]
        for query in queries
    )


def test_a_handoff_and_its_console_actions_read_the_chats_row_once_each(chat, customer, bea):
    """The REST handoff reads the chat to check its owner and once more, locked, to change
    it, and answers from what it changed; each console action (after the check of who may)
    reads it once, locked: none reads the row back after its UPDATE."""
    with CaptureQueriesContext(connection) as asked:
        answer = _ask_over_rest(customer, chat, "a refund")
    assert answer.status_code == 200, answer.content
    assert answer.json()["answerer"]["label"] == "This chat waits for a person from the baristas"
    assert _chat_reads(asked.captured_queries) == 2
    for change in (
        lambda: handoff.handoff_claim(session_id=chat.pk, staff=bea),
        lambda: handoff.staff_reply(session_id=chat.pk, staff=bea, text="Bea here"),
        lambda: handoff.handoff_hand_back(session_id=chat.pk, staff=bea, summary="sorted"),
        lambda: handoff.handoff_take_over(session_id=chat.pk, staff=bea),
        lambda: handoff.handoff_close(session_id=chat.pk, staff=bea),
    ):
        with CaptureQueriesContext(connection) as changed:
            change()
        assert _chat_reads(changed.captured_queries) == 1
    assert Session.objects.get(pk=chat.pk).answerer == "closed"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("requires_postgres")
def test_a_reply_stored_before_the_database_went_away_is_not_a_503_on_the_console(
    chat, customer, bea
):
    # A 503 would have the console (or the person) send the reply again: stored twice.
    handoff.handoff_request(
        session_id=chat.pk, actor=handoff.Actor(user=customer), via="page", group="baristas"
    )
    handoff.handoff_claim(session_id=chat.pk, staff=bea)
    staff = _client(bea)
    with connection_cut_after_commit("conversations_message") as cut:
        answer = staff.post(
            f"/handoffs/{chat.pk}/reply", {"text": "Bea here"}, headers={"HX-Request": "true"}
        )
    assert cut, "the connection was never cut after the reply's commit"
    assert answer.status_code == 200
    assert answer["HX-Redirect"] == f"/handoffs/?chat={chat.pk}"
    assert Message.objects.filter(session_id=chat.pk, text="Bea here").count() == 1
    # Without htmx the answer is the redirect, which reads nothing after the change.
    with connection_cut_after_commit("conversations_message") as cut:
        again = staff.post(f"/handoffs/{chat.pk}/reply", {"text": "Bea again"})
    assert again.status_code == 302
    assert Message.objects.filter(session_id=chat.pk, text="Bea again").count() == 1
