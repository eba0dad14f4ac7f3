"""examples/glove-react runs, unchanged, under Node against a live server (so it cannot rot).

Node's own `fetch` (Node 20) drives every `RemoteStoreActions` method of the example and
one chat turn over a signed chat URL, which needs no headers at all.
"""

from __future__ import annotations

import json
import os
import re
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


HANDOFF_FLOW = Path(__file__).with_name("drive_glove_react_handoff.mjs")
STAFF_PASSWORD = "pw-react-barista-1"


def test_the_example_shows_a_persons_replies(node, live_server_process, live_token):
    """A customer's glove-react app (unchanged) on the REST store: the chat goes to a
    person, a barista claims it on the console and replies, and the history the app loads
    holds the reply as an agent message Glove's frontends render, its author beside it."""
    server = live_server_process
    api = httpx.Client(base_url=server.url, headers={"Authorization": f"Token {live_token}"})
    session_id = api.post("/api/sessions", json={"title": "a person answers"}).json()["sessionId"]
    asked = api.post(f"/api/sessions/{session_id}/handoff", json={"reason": "a refund"})
    assert asked.status_code == 200, asked.text
    chat_pk = server.manage(
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model as users; "
        "from gloveapp.conversations.models import Session; "
        "users().objects.filter(username='react-barista').exists() or "
        "users().objects.create_user('react-barista', password="
        f"'{STAFF_PASSWORD}', first_name='Bea', is_staff=True); "
        f"print(Session.objects.get(key='{session_id}').pk)",
    ).splitlines()[-1]
    staff = _logged_in(server.url, "react-barista", STAFF_PASSWORD)
    for action, data in (("claim", {}), ("reply", {"text": "Bea here: refunded."})):
        done = staff.post(
            f"/handoffs/{chat_pk}/{action}",
            data={**data, "csrfmiddlewaretoken": staff.cookies.get("csrftoken")},
        )
        assert done.status_code == 302, (action, done.status_code, done.text[:300])

    run = subprocess.run(
        [node, str(HANDOFF_FLOW), server.url, live_token, session_id],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    messages = json.loads(run.stdout)["messages"]
    replies = [message for message in messages if message["text"] == "Bea here: refunded."]
    assert len(replies) == 1, messages
    assert replies[0]["sender"] == "agent"
    assert replies[0]["author"]["kind"] == "person"
    assert replies[0]["author"]["name"] == "Bea"


def _logged_in(base_url: str, username: str, password: str) -> httpx.Client:
    client = httpx.Client(base_url=base_url, timeout=30)
    page = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token, "no CSRF token on the login page"
    done = client.post(
        "/accounts/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token[1]},
    )
    assert done.status_code == 302, done.text[:300]
    return client
