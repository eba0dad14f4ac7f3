"""Skills, content skills and hooks configured per agent in GLOVE_AGENTS, in turns run by the
turn worker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import Client

from gloveapp.conversations.models import Message
from gloveapp.conversations.services import session_create
from gloveapp.core.providers.registry import register_model_provider, unregister_model_provider
from gloveapp.core.providers.scripted import ScriptedModel
from tests.agents.conftest import say
from tests.core.support import calls

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("worker"),
    pytest.mark.timeout(120),
]

FACTORIES = "tests.agents.factories"


class Models:
    """The next turn's script, and the models the turns were given."""

    def __init__(self) -> None:
        self.script: list = []
        self.built: list[ScriptedModel] = []

    def __call__(self, model_name: str = "", **kwargs) -> ScriptedModel:
        model = ScriptedModel(list(self.script), label="skills")
        self.script.clear()
        self.built.append(model)
        return model


@pytest.fixture
def models() -> Iterator[Models]:
    models = Models()
    register_model_provider("ext-skills", models, replace=True)
    yield models
    unregister_model_provider("ext-skills")


@pytest.fixture
def chat(settings, tmp_path, transactional_db):
    guide = tmp_path / "latte-art"
    guide.mkdir()
    (guide / "SKILL.md").write_text("---\ndescription: Pour a rosetta.\n---\nTilt the cup.")
    (guide / "examples.md").write_text("A heart, then a tulip.")
    settings.GLOVE_AGENTS = {
        **settings.GLOVE_AGENTS,
        "barista": {
            "factory": f"{FACTORIES}.ping_agent",
            "model": "ext-skills",
            "skills": [
                {"name": "brew-guide", "content": "Grind medium-fine.", "expose_to_agent": True}
            ],
            "content_skills": [{"directory": str(tmp_path)}],
            "hooks": {
                "/closed": f"{FACTORIES}.closed_hook",
                "before_tool": [f"{FACTORIES}.no_refunds"],
            },
        },
    }
    owner = get_user_model().objects.create_user("barista-owner")
    return owner, session_create(owner=owner, agent_name="barista", title="Bar").pk


def _rows(session_id: str) -> list[Message]:
    return list(Message.objects.filter(session_id=session_id).order_by("seq"))


async def rows(session_id: str) -> list[Message]:
    return await sync_to_async(_rows)(session_id)


async def test_it_stores_a_skill_the_user_invokes_before_their_message(models, chat):
    owner, session_id = chat
    models.script.append("Medium-fine it is.")

    await say(session_id, "/brew-guide how fine?")

    stored = await rows(session_id)
    assert (stored[0].text, stored[0].is_skill_injection) == (
        "[Skill: brew-guide]\nGrind medium-fine.",
        True,
    )
    assert stored[1].text == "[invoked_extension__skill_brew-guide] how fine?"
    client = Client()
    await sync_to_async(client.force_login)(owner)
    page = (await sync_to_async(client.get)(f"/sessions/{session_id}/")).content.decode()
    assert 'data-context="skill"' in page


async def test_it_answers_with_a_hook_without_calling_the_model(models, chat):
    _, session_id = chat

    await say(session_id, "/closed can I order?")

    assert [m.text for m in await rows(session_id)] == [
        "[invoked_extension__hook_closed] can I order?",
        "We are closed today.",
    ]
    assert [model.calls for model in models.built] == [[]]


async def test_it_offers_the_content_skills_of_a_folder(models, chat):
    _, session_id = chat
    models.script += [
        calls(("glove_read_skill", {"name": "latte-art", "section": "examples"})),
        "Ok.",
    ]

    await say(session_id, "How do I pour?")

    offered = {spec.name: spec for spec in models.built[0].calls[0].tools}
    assert '<skill name="latte-art" sections="examples">Pour a rosetta.</skill>' in (
        offered["glove_read_skill"].description
    )
    assert "glove_invoke_skill" in offered
    result = (await rows(session_id))[2].tool_results[0]["result"]
    assert result["data"].startswith('<skill name="latte-art" path="')
    assert 'section="examples">\n<content>\nA heart, then a tulip.\n</content>' in result["data"]


async def test_it_runs_a_before_tool_hook_from_settings(models, chat):
    _, session_id = chat
    models.script += [calls(("ping", {"refund": True})), "Ok."]

    await say(session_id, "Refund me")

    result = (await rows(session_id))[2].tool_results[0]["result"]
    assert result == {
        "status": "error",
        "data": None,
        "message": "Refunds are handled at the counter.",
    }
