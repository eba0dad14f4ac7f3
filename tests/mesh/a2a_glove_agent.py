"""Agent g, a configured agent between a test's agent "a" and the A2A agent "x", for the
end-to-end test of `tests/mesh/test_a2a_peers.py` (settings: `tests.mesh.a2a_settings`).

Its wake-up turns run on a turn worker with a scripted model that reads the newest inbox
banner: a message from a is passed on to x (blocking); x's answer is passed back to a, as a
reply to a's message.
"""

from __future__ import annotations

import re

from gloveapp.agents.config import AgentSpec
from gloveapp.core import Message
from gloveapp.core.inbox_context import resolved_banner_items
from gloveapp.core.providers.scripted import ScriptedModel
from tests.core.support import calls


def _newest_banner(prompt: list[Message]) -> list[tuple[str, str, str]]:
    banners = [m.text for m in prompt if m.sender == "user" and m.text.startswith("[Inbox:")]
    return resolved_banner_items(banners[-1]) if banners else []


def pass_it_on(prompt: list[Message]) -> Message:
    for tag, _request, response in _newest_banner(prompt):
        if tag == "mesh:from:x":
            asked = re.search(r"\[message id: (msg_a_[^\]]+)\]", _first_from_a(prompt)).group(1)
            return calls(
                (
                    "glove_mesh_send_message",
                    {"to": "a", "content": f"X says: {response}", "in_reply_to": asked},
                )
            )
        if tag == "mesh:from:a":
            return calls(
                ("glove_mesh_send_message", {"to": "x", "content": response, "blocking": True})
            )
    return Message(sender="agent", text="Nothing to pass on.")


def _first_from_a(prompt: list[Message]) -> str:
    for message in prompt:
        if message.sender == "user" and message.text.startswith("[Inbox:"):
            for tag, request, _ in resolved_banner_items(message.text):
                if tag == "mesh:from:a":
                    return request
    raise AssertionError("no message from a in the conversation")


def g_model() -> ScriptedModel:
    return ScriptedModel([pass_it_on, "Done."], label="g")


def build_agent() -> AgentSpec:
    return AgentSpec(name="g", title="Agent G", system_prompt="you are agent g")
