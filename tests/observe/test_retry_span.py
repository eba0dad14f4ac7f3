"""A turn taken back from a dead worker is traced as a retry: `glove.retry` under the new
attempt's `invoke_agent`, naming the worker before it (the SDK's in-memory exporter)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from gloveapp.conversations.services import session_create
from gloveapp.turns import claim, submit
from gloveapp.turns import public as turns

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


@pytest.mark.usefixtures("close_worker_connections")
async def test_a_retried_turn_is_traced_as_a_retry_after_the_dead_worker(
    settings, spans, turn_worker
):
    settings.GLOVE_TURN_LEASE_SECONDS = 0.5
    hana = await sync_to_async(get_user_model().objects.create_user)("hana")
    session = await sync_to_async(session_create)(owner=hana, agent_name="coffee")
    await sync_to_async(submit.turn_submit)(
        session_id=session.pk, text="show me the menu", user_id=hana.pk
    )
    # A worker claims the turn (its claim stores the attempt's step), then dies.
    await sync_to_async(claim.turn_claim_next)(session_id=session.pk, worker_id="dead")

    await turns.wait_until_idle(session.pk)

    finished = spans.get_finished_spans()
    [agent] = [span for span in finished if span.name == "invoke_agent coffee"]
    [retry] = [span for span in finished if span.name == "glove.retry"]
    assert agent.attributes["glove.turn.attempt"] == 2
    assert agent.attributes["glove.turn.status"] == "done"
    assert retry.parent.span_id == agent.context.span_id
    assert retry.attributes["glove.retry.previous_worker"] == "dead"
    chats = [span for span in finished if span.name == "chat demo"]
    assert len(chats) == 2 and all(c.parent.span_id == agent.context.span_id for c in chats)
