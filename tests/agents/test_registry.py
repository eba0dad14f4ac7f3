"""GLOVE_AGENTS / GLOVE_MODEL: the registry, its errors and the system checks."""

from __future__ import annotations

import pytest
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured

from gloveapp.agents.config import (
    AgentSpec,
    agent_names,
    configured_model,
    get_agent_spec,
    model_label,
)
from gloveapp.demo.demo_model import DemoModel

FACTORIES = "tests.agents.factories"


def glove_errors() -> list[str]:
    return [message.id for message in run_checks(tags=["glove"])]


def test_it_builds_the_coffee_agent_from_settings():
    spec = get_agent_spec("coffee")

    assert isinstance(spec, AgentSpec)
    assert spec.name == "coffee"
    assert "glove_post_to_inbox" in spec.system_prompt
    assert [t.name for t in spec.tools] == [
        "get_catalogue",
        "check_stock",
        "add_to_cart",
        "view_cart",
        "checkout",
    ]
    assert spec.tool("checkout").slot_template == "tools/coffee/checkout_slot.html"
    assert all(t.result_template for t in spec.tools)


def test_it_uses_the_default_agent_for_an_empty_name(settings):
    settings.GLOVE_DEFAULT_AGENT = "coffee"

    assert get_agent_spec("").name == "coffee"


def test_it_accepts_a_factory_returning_a_mapping(settings):
    settings.GLOVE_AGENTS = {"ping": f"{FACTORIES}.mapping_agent"}

    spec = get_agent_spec("ping")

    assert (spec.name, spec.title, spec.system_prompt) == ("ping", "Ping", "You answer pings.")
    assert agent_names() == ["ping"]


def test_it_names_the_known_agents_for_an_unknown_name():
    with pytest.raises(ImproperlyConfigured, match=r"Unknown agent 'tea'.*defines coffee"):
        get_agent_spec("tea")


@pytest.mark.parametrize(
    ("path", "complaint"),
    [
        ("tests.agents.factories.missing", "cannot be imported"),
        ("nowhere.at.all", "cannot be imported"),
        ("nodots", "must be a dotted path"),
        (f"{FACTORIES}.NOT_CALLABLE", "is not callable"),
        (f"{FACTORIES}.not_an_agent", "must return an AgentSpec"),
        (f"{FACTORIES}.prompt_less_agent", "returned no 'system_prompt'"),
    ],
)
def test_it_explains_a_broken_factory(settings, path, complaint):
    settings.GLOVE_AGENTS = {"broken": path}

    with pytest.raises(ImproperlyConfigured, match=complaint):
        get_agent_spec("broken")


def test_it_passes_the_checks_as_shipped(settings):
    settings.GLOVE_MODEL = ""

    assert glove_errors() == []


def test_it_flags_an_unimportable_agent_path(settings):
    settings.GLOVE_AGENTS = {"coffee": "gloveapp.demo.coffee.build_agnet"}

    assert glove_errors() == ["glove.E001"]


def test_it_flags_a_default_agent_that_does_not_exist(settings):
    settings.GLOVE_DEFAULT_AGENT = "tea"

    assert glove_errors() == ["glove.E002"]


def test_it_flags_an_unknown_model_provider(settings):
    settings.GLOVE_MODEL = "gemini:pro"

    assert glove_errors() == ["glove.E003"]


def test_it_flags_a_model_whose_api_key_is_missing(settings, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    settings.GLOVE_MODEL = "anthropic:claude-sonnet-4-5"

    assert glove_errors() == ["glove.E004"]


def test_it_accepts_a_model_with_its_api_key(settings, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    settings.GLOVE_MODEL = "openai:gpt-4o-mini"

    assert glove_errors() == []


def test_it_flags_a_model_spec_without_a_model_name(settings, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    settings.GLOVE_MODEL = "anthropic"

    assert glove_errors() == ["glove.E005"]


def test_it_runs_the_offline_demo_model_when_no_model_is_configured(settings):
    settings.GLOVE_MODEL = ""

    assert isinstance(configured_model(), DemoModel)
    assert configured_model() is not configured_model()
    assert "not an AI" in model_label()


def test_it_keeps_one_network_adapter_per_agent_between_turns(settings, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    settings.GLOVE_MODEL = "anthropic:claude-test-keep"

    coffee = configured_model(agent="coffee")

    assert configured_model(agent="coffee") is coffee
    assert configured_model(agent="tea") is not coffee
    assert configured_model() is not coffee  # no agent: a fresh adapter, e.g. for /api/chat


def test_it_builds_a_fresh_demo_model_per_turn_even_for_an_agent(settings):
    settings.GLOVE_MODEL = ""

    assert configured_model(agent="coffee") is not configured_model(agent="coffee")


def test_it_labels_a_configured_model_by_its_spec(settings):
    settings.GLOVE_MODEL = "openai:gpt-4o-mini"

    assert model_label() == "openai:gpt-4o-mini"


def test_it_reports_a_broken_mcp_server_and_an_unknown_subagent(settings):
    settings.GLOVE_AGENTS = {
        "coffee": {
            "factory": "gloveapp.demo.coffee.build_agent",
            "mcp_servers": [{"name": "time"}],
            "subagents": ["tea"],
        }
    }

    messages = [m.msg for m in run_checks(tags=["glove"]) if m.id == "glove.E010"]

    assert messages == [
        "GLOVE_AGENTS['coffee'].mcp_servers[time]: give exactly one of url (HTTP) or command (stdio)",
        "GLOVE_AGENTS['coffee'].subagents names 'tea', which GLOVE_AGENTS does not define.",
    ]


def test_it_reports_a_handoff_entry_it_cannot_read_instead_of_turning_the_handoff_off(settings):
    settings.GLOVE_AGENTS = {
        "coffee": {
            "factory": "gloveapp.demo.coffee.build_agent",
            "handoff": {"group": "baristas", "max_queue_wait_second": 600},
        }
    }

    messages = [m.msg for m in run_checks(tags=["glove"]) if m.id == "glove.E010"]

    assert messages == [
        "GLOVE_AGENTS['coffee']['handoff']: unknown key(s) max_queue_wait_second",
    ]


def test_it_adds_the_settings_extensions_to_the_factorys_agent(settings):
    settings.GLOVE_AGENTS = {
        "ping": {
            "factory": f"{FACTORIES}.mapping_agent",
            "model": "anthropic:claude-haiku-4-5",
            "mcp_servers": [{"name": "time", "command": "mcp-server-time"}],
        }
    }

    spec = get_agent_spec("ping")

    assert spec.model == "anthropic:claude-haiku-4-5"
    assert spec.mcp_servers == [{"name": "time", "command": "mcp-server-time"}]
    assert [t.name for t in spec.tools] == ["ping"]
