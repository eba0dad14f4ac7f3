"""The services refuse strings no database or channel layer can hold, before writing anything.

Lone surrogates (U+D800-U+DFFF on their own) are valid in a Python str and in JSON text but
not in UTF-8: stored, they break the live relay and every later read of the session.
"""

from __future__ import annotations

import pytest

from gloveapp.conversations import services
from gloveapp.conversations.models import Message, Task
from gloveapp.core.types import Message as CoreMessage
from gloveapp.core.types import Task as CoreTask
from gloveapp.core.types import ToolCall
from gloveapp.live.models import LiveEvent

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

LONE = "\ud800"


@pytest.fixture
def session():
    return services.session_create(session_id="chat-1")


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (
            CoreMessage(
                sender="agent",
                text="",
                tool_calls=[ToolCall(tool_name="x", input_args={"q": LONE})],
            ),
            "messages[1].tool_calls[0].input_args.q",
        ),
        (
            CoreMessage(
                sender="agent", text="", tool_calls=[ToolCall(tool_name="x", input_args={LONE: 1})]
            ),
            "messages[1].tool_calls[0].input_args",
        ),
        (CoreMessage(sender="user", text=f"hi {LONE}"), "messages[1].text"),
        (
            CoreMessage(sender="agent", text="", reasoning_content=LONE),
            "messages[1].reasoning_content",
        ),
    ],
)
def test_it_refuses_a_lone_surrogate_in_a_message(session, message, field):
    before = LiveEvent.objects.count()
    fine = CoreMessage(sender="user", text="first")

    with pytest.raises(ValueError, match="lone surrogate") as refused:
        services.messages_append(session_id=session.id, messages=[fine, message])

    assert str(refused.value).startswith(f"{field} must not")
    assert not Message.objects.filter(session_id=session.id).exists()
    assert LiveEvent.objects.count() == before


def test_it_refuses_a_lone_surrogate_in_a_task_or_title(session):
    with pytest.raises(ValueError, match=r"^tasks\[0\]\.content must not contain lone surrogate"):
        services.tasks_replace(
            session_id=session.id, tasks=[CoreTask(id="t1", content=LONE, active_form="")]
        )
    with pytest.raises(ValueError, match=r"^title must not contain lone surrogate"):
        services.session_update(session=session, title=LONE)

    assert not Task.objects.filter(session_id=session.id).exists()
    session.refresh_from_db()
    assert session.title == ""


def test_it_keeps_accepting_characters_outside_the_basic_plane(session):
    emoji = "\U0001f600"
    services.messages_append(
        session_id=session.id,
        messages=[
            CoreMessage(
                sender="agent",
                text=emoji,
                tool_calls=[ToolCall(tool_name="x", input_args={emoji: emoji})],
            )
        ],
    )

    stored = Message.objects.get(session_id=session.id)
    assert stored.text == emoji
    assert stored.tool_calls[0]["input_args"] == {emoji: emoji}
