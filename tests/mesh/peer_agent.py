"""Agent "b" as a configured agent, for the cross-process tests (`tests.mesh.peer_settings`).

    DJANGO_SETTINGS_MODULE=tests.mesh.peer_settings manage.py run_agent b --mesh-id b
    DJANGO_SETTINGS_MODULE=tests.mesh.peer_settings manage.py turn_worker

Its turns run on the turn worker with a scripted model: acknowledge the message the inbox
banner names, then reply to it, then say "Done.".
"""

from __future__ import annotations

import re

from gloveapp.agents.config import AgentSpec
from gloveapp.core import Message
from gloveapp.core.providers.scripted import ScriptedModel
from tests.core.support import calls


def _message_id(prompt: list[Message]) -> str:
    banner = next(m.text for m in prompt if m.sender == "user" and m.text.startswith("[Inbox:"))
    return re.search(r"\[message id: (msg_[^\]]+)\]", banner).group(1)


def acknowledge(prompt: list[Message]) -> Message:
    return calls(
        ("glove_mesh_acknowledge", {"message_id": _message_id(prompt), "note": "ack from B"})
    )


def reply(prompt: list[Message]) -> Message:
    return calls(
        (
            "glove_mesh_send_message",
            {"to": "a", "content": "reply from B", "in_reply_to": _message_id(prompt)},
        )
    )


def b_model() -> ScriptedModel:
    """The model of one turn of b (GLOVE_MODEL names it in peer_settings): a fresh script."""
    return ScriptedModel([acknowledge, reply, "Done."], label="b")


def build_agent() -> AgentSpec:
    return AgentSpec(name="b", title="Agent B", system_prompt="you are agent b")
