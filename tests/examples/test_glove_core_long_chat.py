"""The published glove-core, unchanged, opens a chat longer than any cap a server once had.

Glove's `Context.getMessages()` reads the whole history through the store's GET, so an
unpaged GET that refuses a long chat stops the agent before any model call. The driver
(tests/examples/glove-core/drive_long_chat.mjs) runs one `processRequest` over a store
adapter on examples/glove-react's store actions, against a live server.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.conftest import service_missing

pytestmark = [pytest.mark.postgres, pytest.mark.process]

GLOVE_CORE = Path(__file__).with_name("glove-core")
DRIVER = GLOVE_CORE / "drive_long_chat.mjs"
LONG_CHAT = 12_000  # past the 10,000 the unpaged GET used to refuse
BATCH = 1000


def installed_glove_core() -> str:
    """The path of node, with the published glove-core installed beside the driver (npm
    ci from its lock file, once per checkout)."""
    node = shutil.which("node")
    if node is None:
        service_missing("node is not installed (apt-get install nodejs)")
    if not (GLOVE_CORE / "node_modules" / "glove-core").exists():
        npm = shutil.which("npm")
        if npm is None:
            service_missing("npm is not installed (apt-get install npm)")
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=GLOVE_CORE,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            service_missing(f"npm ci of glove-core failed: {done.stderr[-500:]}")
    return node


def seed_long_chat(url: str, token: str, session_id: str, length: int) -> None:
    """`length` messages through the store's append, a batch at a time."""
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        for start in range(0, length, BATCH):
            batch = [
                {"sender": "user" if n % 2 == 0 else "agent", "text": f"message {n}"}
                for n in range(start, min(start + BATCH, length))
            ]
            answer = client.post(f"/api/sessions/{session_id}/messages", json={"messages": batch})
            answer.raise_for_status()


def test_glove_core_answers_on_a_chat_of_12000_messages(live_server_process, live_token):
    node = installed_glove_core()
    session_id = httpx.post(
        f"{live_server_process.url}/api/sessions",
        json={"title": "a long chat"},
        headers={"Authorization": f"Token {live_token}"},
    ).json()["sessionId"]
    seed_long_chat(live_server_process.url, live_token, session_id, LONG_CHAT)

    run = subprocess.run(
        [node, str(DRIVER), live_server_process.url, live_token, session_id],
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    # The model saw the whole history, the new question last, and its answer was stored.
    [call] = out["modelCalls"]
    assert call["count"] == LONG_CHAT + 1
    assert call["first"] == "message 0"
    assert call["last"] == "One more thing: what did I order first?"
    assert out["storedAfter"] == LONG_CHAT + 2
    assert out["lastStored"][-1] == ["agent", f"Read {LONG_CHAT + 1} messages."]
