"""create_workspace, export/import of the seed's JSONL, and what staff see in the admin."""

from __future__ import annotations

import json
import uuid
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from inbox.workspaces.models import Workspace, WorkspaceEntry
from inbox.workspaces.services import entry_push, workspace_create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


@pytest.fixture
def ann(db):
    return get_user_model().objects.create_user("ann", password="pw-ann-123456")


def test_it_creates_a_workspace_printing_the_token_once_and_storing_only_its_hash(ann, tmp_path):
    out = StringIO()
    call_command(
        "create_workspace",
        "--label",
        "Macro",
        "--root",
        str(tmp_path),
        "--owner",
        "ann",
        stdout=out,
    )
    text = out.getvalue()
    workspace = Workspace.objects.get()
    token = text.split("token:")[1].split()[0]
    assert workspace.token_hash != token and token not in workspace.token_hash
    snippet = json.loads(text.split(".mcp.json for")[1].split(":\n", 1)[1])
    server = snippet["mcpServers"]["glove-workspace"]
    assert server["url"].endswith(f"/mcp/{workspace.pk}")
    assert server["headers"]["Authorization"] == f"Bearer {token}"


def mcp_json_server(folder) -> dict:
    return json.loads((folder / ".mcp.json").read_text())["mcpServers"]["glove-workspace"]


def test_it_names_the_server_make_run_last_served_unless_a_url_is_configured(
    ann, tmp_path, settings, monkeypatch
):
    monkeypatch.delenv("GLOVE_PUBLIC_URL", raising=False)
    settings.BASE_DIR = tmp_path
    (tmp_path / ".make-run-url").write_text("http://127.0.0.1:8100\n")
    folder = tmp_path / "work"
    folder.mkdir()
    call_command(
        "create_workspace",
        "--label",
        "A",
        "--root",
        str(folder),
        "--owner",
        "ann",
        "--write",
        stdout=StringIO(),
    )
    assert mcp_json_server(folder)["url"].startswith("http://127.0.0.1:8100/mcp/ws-")

    settings.GLOVE_PUBLIC_URL = "https://glove.example.com"
    call_command(
        "create_workspace",
        "--label",
        "B",
        "--root",
        str(folder),
        "--owner",
        "ann",
        "--write",
        "--force",
        stdout=StringIO(),
    )
    assert mcp_json_server(folder)["url"].startswith("https://glove.example.com/mcp/ws-")


def test_write_force_replaces_an_mcp_json_keeping_it_private(ann, tmp_path):
    (tmp_path / ".mcp.json").write_text("{}")
    with pytest.raises(CommandError, match="--force"):
        call_command(
            "create_workspace",
            "--label",
            "A",
            "--root",
            str(tmp_path),
            "--owner",
            "ann",
            "--write",
            stdout=StringIO(),
        )
    assert Workspace.objects.count() == 0
    with pytest.raises(CommandError, match="only with --write"):
        call_command(
            "create_workspace",
            "--label",
            "A",
            "--root",
            str(tmp_path),
            "--owner",
            "ann",
            "--force",
            stdout=StringIO(),
        )
    call_command(
        "create_workspace",
        "--label",
        "A",
        "--root",
        str(tmp_path),
        "--owner",
        "ann",
        "--write",
        "--force",
        stdout=StringIO(),
    )
    workspace = Workspace.objects.get()
    assert mcp_json_server(tmp_path)["url"].endswith(f"/mcp/{workspace.pk}")
    assert oct((tmp_path / ".mcp.json").stat().st_mode & 0o777) == "0o600"
    assert [p.name for p in tmp_path.iterdir()] == [".mcp.json"]  # no temporary file left


def test_it_refuses_a_root_that_is_not_a_folder(ann, tmp_path):
    with pytest.raises(CommandError, match="root"):
        call_command(
            "create_workspace", "--label", "x", "--root", str(tmp_path / "nope"), "--owner", "ann"
        )


def test_export_then_import_round_trips_and_is_idempotent(ann, tmp_path):
    (tmp_path / "a.md").write_text("a")
    workspace, _ = workspace_create(label="Macro", root=str(tmp_path), owner=ann)
    first = entry_push(workspace=workspace, docs=[{"path": "a.md"}], comments="one")
    entry_push(workspace=workspace, comments="two")
    out = StringIO()
    call_command("export_workspace_inbox", stdout=out, stderr=StringIO())
    # Oldest first; two pushes in one millisecond share a ts and are ordered by id instead.
    lines = {json.loads(line)["id"]: json.loads(line) for line in out.getvalue().splitlines()}
    assert len(lines) == 2
    assert lines[str(first.pk)] == {
        "id": str(first.pk),
        "ts": first.ts,
        "workspaceId": workspace.pk,
        "workspaceLabel": "Macro",
        "docs": [{"path": "a.md"}],
        "comments": "one",
    }
    WorkspaceEntry.objects.all().delete()
    file = tmp_path / "entries.jsonl"
    file.write_text(out.getvalue())
    result = StringIO()
    call_command("import_workspace_inbox", str(file), stdout=result, stderr=StringIO())
    assert "imported 2, already present 0, malformed 0" in result.getvalue()
    result = StringIO()
    call_command("import_workspace_inbox", str(file), stdout=result, stderr=StringIO())
    assert "imported 0, already present 2" in result.getvalue()
    assert WorkspaceEntry.objects.count() == 2


def test_import_skips_and_reports_malformed_lines(ann, tmp_path):
    workspace, _ = workspace_create(label="Macro", root=str(tmp_path), owner=ann)
    good = {
        "id": str(uuid.uuid4()),
        "ts": 1715789012345,
        "workspaceId": workspace.pk,
        "comments": "ok",
    }
    lines = [
        json.dumps(good),
        "{not json",
        json.dumps({**good, "id": "nope"}),
        json.dumps({**good, "id": str(uuid.uuid4()), "workspaceId": "ws-unknown"}),
        json.dumps({**good, "id": str(uuid.uuid4()), "docs": [{"path": "../x"}]}),
        json.dumps({**good, "id": str(uuid.uuid4()), "comments": " ", "docs": []}),
    ]
    file = tmp_path / "entries.jsonl"
    file.write_text("\n".join(lines) + "\n")
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("import_workspace_inbox", str(file), stdout=out, stderr=err)
    assert raised.value.returncode == 2
    assert "imported 1, already present 0, malformed 5" in out.getvalue()
    report = err.getvalue()
    for number in (2, 3, 4, 5, 6):
        assert f"line {number}: skipped" in report
    assert "line 4: skipped: workspaceId: no such workspace" in report
    assert WorkspaceEntry.objects.count() == 1


def test_staff_see_workspaces_in_the_admin_but_never_the_token(client, tmp_path):
    staff = get_user_model().objects.create_superuser("boss", password="pw-boss-123456")
    workspace, token = workspace_create(label="Macro", root=str(tmp_path), owner=staff)
    entry_push(workspace=workspace, comments="from the agent")
    client.force_login(staff)
    listing = client.get("/admin/inbox/workspace/")
    detail = client.get(f"/admin/inbox/workspace/{workspace.pk}/change/")
    entries = client.get("/admin/inbox/workspaceentry/")
    assert listing.status_code == detail.status_code == entries.status_code == 200
    assert "Macro" in listing.content.decode()
    assert "from the agent" in entries.content.decode()
    for page in (listing, detail, entries):
        assert token not in page.content.decode()
        assert workspace.token_hash not in page.content.decode()
