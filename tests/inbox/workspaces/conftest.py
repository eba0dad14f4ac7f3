"""A real server (Daphne in a subprocess) with two users, each owning a workspace folder."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.api.liveserver import LiveServer


@dataclass
class LiveWorkspace:
    id: str
    token: str
    root: Path
    mcp_url: str
    owner_token: str  # the owner's REST API token


def parse_created(output: str) -> tuple[str, str]:
    workspace_id = re.search(r"^id:\s+(\S+)", output, re.M).group(1)
    token = re.search(r"^token:\s+(\S+)", output, re.M).group(1)
    return workspace_id, token


def make_workspace(server: LiveServer, root: Path, owner: str, owner_token: str) -> LiveWorkspace:
    output = server.manage(
        "create_workspace", "--label", f"{owner}'s research", "--root", str(root), "--owner", owner
    )
    workspace_id, token = parse_created(output)
    return LiveWorkspace(
        id=workspace_id,
        token=token,
        root=root,
        mcp_url=f"{server.url}/mcp/{workspace_id}",
        owner_token=owner_token,
    )


def fill_folder(root: Path, outside: Path) -> None:
    (root / "research").mkdir(parents=True)
    (root / "research" / "report.md").write_text("# Report\n\nAll **done**.\n")
    (root / "notes.txt").write_text("plain notes\n")
    (outside / "secret.txt").write_text("top secret\n")
    os.symlink(outside / "secret.txt", root / "escape.txt")
    os.symlink(root / "notes.txt", root / "inside-link.txt")
    # A Latin-1 file name: the OS opens it, but it is no UTF-8 text (arrives as "a\udc80.md").
    with open(os.path.join(os.fsencode(root), b"a\x80.md"), "wb") as latin1_named:
        latin1_named.write(b"# not UTF-8 named\n")


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[dict]:
    base = tmp_path_factory.mktemp("workspaces")
    with LiveServer(database_url=os.environ.get("DATABASE_URL")) as server:
        ann_token = server.token_for("ann")
        bob_token = server.token_for("bob")
        ann_root, bob_root, outside = base / "ann", base / "bob", base / "outside"
        for folder in (ann_root, bob_root, outside):
            folder.mkdir()
        fill_folder(ann_root, outside)
        (bob_root / "bob.md").write_text("bob's\n")
        yield {
            "server": server,
            "ann": make_workspace(server, ann_root, "ann", ann_token),
            "bob": make_workspace(server, bob_root, "bob", bob_token),
            "outside": outside,
        }
