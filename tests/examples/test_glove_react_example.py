"""examples/glove-react runs, unchanged, under Node against a live server (so it cannot rot).

Node's own `fetch` (Node 20) drives every `RemoteStoreActions` method of the example and
one chat turn over a signed chat URL, which needs no headers at all.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.conftest import service_missing

pytestmark = [pytest.mark.postgres]

DRIVER = Path(__file__).with_name("drive_glove_react.mjs")


@pytest.fixture(scope="module")
def node() -> str:
    path = shutil.which("node")
    if path is None:
        service_missing("node is not installed (apt-get install nodejs)")
    version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    if int(version.lstrip("v").split(".")[0]) < 18:
        service_missing(f"node {version.strip()} has no global fetch; Node 18+ is needed")
    return path


def test_it_runs_every_store_action_and_a_chat_turn_from_node(
    node, live_server_process, live_token
):
    session_id = httpx.post(
        f"{live_server_process.url}/api/sessions",
        json={"title": "from node"},
        headers={"Authorization": f"Token {live_token}"},
    ).json()["sessionId"]
    run = subprocess.run(
        [node, str(DRIVER), live_server_process.url, live_token, session_id],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)

    assert out["messages"][0] == {"sender": "user", "text": "Hi", "pre_modified_text": "hi"}
    assert out["messages"][1]["provider_options"] == {
        "openrouter": {"reasoning_details": [{"type": "reasoning.text", "text": "hm"}]}
    }
    assert out["messages"][1]["tool_calls"][0]["provider_options"] == {
        "google": {"thoughtSignature": "sig"}
    }
    assert out["tokenCountAfterAdd"] == 120
    assert out["turnCountAfterTwo"] == 2
    assert out["countersAfterReset"] == [0, 0]
    assert [(t["id"], t["status"]) for t in out["tasks"]] == [
        ("t1", "pending"),
        ("t/2", "in_progress"),
    ]
    assert [i["status"] for i in out["inbox"]] == ["pending"]
    assert out["resolvedBefore"] == []
    assert [i["status"] for i in out["inboxAfterUpdate"]] == ["consumed"]
    assert out["unknownUpdate"] == 404
    assert (out["permissionBefore"], out["permissionAfter"]) == ("unset", "granted")
    assert out["permissionOtherInput"] == "unset"
    assert out["permissionNoInput"] == "denied"

    assert out["frameTypes"][-1] == "done"
    assert out["done"]["message"]["sender"] == "agent"
    assert out["done"]["message"]["text"]
    assert out["plainChatFromNode"] == "Chat endpoint error: 401 Unauthorized"


DEFAULT_FLOW = Path(__file__).with_name("drive_use_glove_default.mjs")


@pytest.fixture(scope="module")
def lazy_server():
    """A server as a glove-react app deploys it: GLOVE_LAZY_SESSIONS on."""
    from tests.api.liveserver import LiveServer

    with LiveServer(
        database_url=os.environ.get("DATABASE_URL"), extra_env={"GLOVE_LAZY_SESSIONS": "true"}
    ) as server:
        yield server


def test_it_runs_use_gloves_default_flow_with_a_session_id_made_up_in_the_browser(
    node, lazy_server
):
    live_server_process = lazy_server
    live_token = lazy_server.token_for("react-default-flow")
    run = subprocess.run(
        [node, str(DEFAULT_FLOW), live_server_process.url, live_token],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)

    # Read before anything exists: the empty defaults, not a 404.
    assert out["mount"] == {"messages": [], "tasks": [], "inbox": [], "tokens": 0, "turns": 0}
    # The first message created the session under the browser's id; a reload reads it.
    assert out["reload"]["messages"][0] == ["user", "Hello"]
    assert out["reload"]["messages"][1][0] == "agent" and out["reload"]["messages"][1][1]
    assert out["reload"]["turns"] == 1
    listed = httpx.get(
        f"{live_server_process.url}/api/sessions",
        headers={"Authorization": f"Token {live_token}"},
    ).json()
    assert out["sessionId"] in [session["sessionId"] for session in listed]
