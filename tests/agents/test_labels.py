"""What people read of an agent's tools, inbox items and name: every built-in tool, every
MCP tool and every tag has words of its own, from one home (`gloveapp.agents.labels`)."""

from __future__ import annotations

from gloveapp.agents.labels import (
    agent_title,
    banner_answers,
    inbox_kind_label,
    tool_label,
)
from gloveapp.core.builtin_tools import INBOX_TOOL_NAME, TASK_TOOL_NAME
from gloveapp.core.content_skills import READ_SKILL_TOOL_NAME
from gloveapp.core.extensions import SKILL_TOOL_NAME, SUBAGENT_TOOL_NAME
from gloveapp.core.inbox_context import resolved_banner_text
from gloveapp.core.types import InboxItem
from mesh.core.tools import ACK_TOOL, BROADCAST_TOOL, LIST_TOOL, SEND_TOOL

MESSAGE_ID = "msg_chat-glove_d69801d5e2_1796154010356_2f477930"


def test_it_labels_every_built_in_tool_in_words():
    names = (INBOX_TOOL_NAME, TASK_TOOL_NAME, SKILL_TOOL_NAME, READ_SKILL_TOOL_NAME)
    names += (SUBAGENT_TOOL_NAME, SEND_TOOL, BROADCAST_TOOL, LIST_TOOL, ACK_TOOL)
    for name in names:
        label = tool_label("coffee", name)
        assert "glove" not in label.lower() and "_" not in label, (name, label)
    assert tool_label("coffee", SEND_TOOL) == "Message to another agent"


def test_it_reads_an_mcp_tool_by_its_configured_label_else_without_its_namespace(settings):
    settings.GLOVE_AGENTS = {
        **settings.GLOVE_AGENTS,
        "clock": {
            "factory": "tests.agents.factories.plain_agent",
            "mcp_servers": [
                {
                    "name": "time",
                    "command": "mcp-server-time",
                    "labels": {"convert_time": "Time zones"},
                }
            ],
        },
    }
    assert tool_label("clock", "time__convert_time") == "Time zones"
    assert tool_label("clock", "time__get_current_time") == "Get current time"
    assert tool_label("gone", "docs__search_pages") == "Search pages"


def test_it_names_the_agent_by_its_title_not_its_internal_name():
    assert agent_title("coffee") == "Brew coffee shop"
    assert agent_title("an-agent-since-removed") == "An agent since removed"


def test_it_names_each_inbox_kind_in_words():
    waiting = f'Waiting for response from "Roastery" (roastery) to message {MESSAGE_ID}'
    assert inbox_kind_label("restock_watch") == "Restock watch"
    assert inbox_kind_label("task") == "Task"
    assert inbox_kind_label(f"mesh:waiting:{MESSAGE_ID}", waiting) == "Roastery answered"
    assert inbox_kind_label(f"mesh:waiting:{MESSAGE_ID}", waiting, answered=False) == (
        "Waiting for Roastery"
    )
    asked = 'Message from "Roastery" (roastery) [message id: msg_r_1]'
    assert inbox_kind_label("mesh:from:roastery", asked) == "Message from Roastery"
    assert inbox_kind_label("mesh:from:roastery", asked + f" (replying to {MESSAGE_ID})") == (
        "Roastery answered"
    )
    assert inbox_kind_label("mesh:broadcast:from:roastery", "") == "Broadcast from Roastery"


def test_a_mesh_answer_in_the_banner_reads_once_and_in_words():
    answer = "Roastery here: 6 bags of Kenya AA are in stock."
    items = [
        InboxItem(
            id="inbox_1",
            tag=f"mesh:waiting:{MESSAGE_ID}",
            request=f'Waiting for response from "Roastery" (roastery) to message {MESSAGE_ID}',
            response=answer,
            status="resolved",
            resolved_at="2026-12-01T21:00:00.000Z",
        ),
        InboxItem(
            id="inbox_2",
            tag="mesh:from:roastery",
            request=f'Message from "Roastery" (roastery) [message id: m2] (replying to {MESSAGE_ID})',
            response=answer,
            status="resolved",
            resolved_at="2026-12-01T21:00:00.000Z",
        ),
    ]
    assert banner_answers(resolved_banner_text(items)) == [("Roastery answered", answer)]
