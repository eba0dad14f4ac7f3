"""examples/mcp_client.py, unchanged, against a live server: the newcomer's path from
`create_workspace --write` to a reply read back with the MCP SDK's client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.api.liveserver import LiveServer

pytestmark = [pytest.mark.timeout(180), pytest.mark.postgres]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mcp_client.py"
REPLY = """
from inbox.workspaces.models import WorkspaceEntry
from inbox.workspaces.services import entry_reply
entry = WorkspaceEntry.objects.get()
entry_reply(entry=entry, author=entry.owner, text="Use a B-tree.")
"""


def run_example(*args: str) -> dict:
    run = subprocess.run(
        [sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def server():
    with LiveServer(database_url=os.environ.get("DATABASE_URL")) as live:
        live.token_for("ann")  # creates ann
        yield live


def test_it_pushes_then_reads_a_reply_once_through_the_written_mcp_json(server, tmp_path):
    output = server.manage(
        "create_workspace",
        "--label",
        "Research",
        "--root",
        str(tmp_path),
        "--owner",
        "ann",
        "--write",
        "--base-url",
        server.url,
    )
    config = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["glove-workspace"]
    url, token = config["url"], config["headers"]["Authorization"].removeprefix("Bearer ")

    pushed = run_example(url, token, "--push", "Which index should I use?")
    server.manage("shell", "-c", REPLY)
    first = run_example(url, token)
    second = run_example(url, token)

    assert "wrote " in output and "gws_" not in output.split("wrote ")[1]
    assert oct((tmp_path / ".mcp.json").stat().st_mode & 0o777) == "0o600"
    assert pushed["pushed"]["ok"] is True and pushed["replies"] == []
    assert [(r["text"], r["from"]) for r in first["replies"]] == [("Use a B-tree.", "ann")]
    assert first["replies"][0]["entryId"] == pushed["pushed"]["entryId"]
    assert second["replies"] == []  # each reply is handed out once


def test_it_refuses_to_overwrite_an_mcp_json_and_creates_no_workspace(server, tmp_path):
    (tmp_path / ".mcp.json").write_text("{}")
    run = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "create_workspace",
            "--label",
            "X",
            "--root",
            str(tmp_path),
            "--owner",
            "ann",
            "--write",
        ],
        cwd=Path(__file__).resolve().parents[2],
        env=server.env,
        capture_output=True,
        text=True,
    )
    assert run.returncode != 0 and "exists already" in run.stderr
    assert (tmp_path / ".mcp.json").read_text() == "{}"
