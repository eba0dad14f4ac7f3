"""Issue 22's smaller findings, replayed: `limit=201` was silently clamped, `note.txt/` was a
doc path, a workspace root swapped for a symlink was followed, and a GET marked an entry
read (that one is in test_pages.py)."""

from __future__ import annotations

import os

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from inbox.workspaces.services import EntryInvalid, entry_push, workspace_create

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture
def ann(db):
    return get_user_model().objects.create_user("ann")


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "note.txt").write_text("my note")
    (root / "sub").mkdir()
    (root / "sub" / "deep.txt").write_text("deep")
    return root


@pytest.fixture
def workspace(ann, folder):
    workspace, _ = workspace_create(label="Probe", root=str(folder), owner=ann)
    return workspace


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_limit_over_the_maximum_is_a_400_naming_the_field(ann, workspace):
    api = _api(ann)
    refused = api.get("/api/inbox/history", {"limit": 201})
    assert refused.status_code == 400
    assert refused.json()["field"] == "limit"
    assert "at most 200" in str(refused.json())
    assert api.get("/api/inbox/history", {"limit": 200}).status_code == 200


@pytest.mark.parametrize(
    "path", ["note.txt/", "./note.txt", "sub/../note.txt", "sub//deep.txt", "sub/./deep.txt"]
)
def test_a_doc_path_with_a_trailing_slash_or_a_dot_segment_is_refused(ann, workspace, path):
    with pytest.raises(EntryInvalid) as refused:
        entry_push(workspace=workspace, docs=[{"path": path}])
    assert refused.value.field == "docs[0].path"
    answer = _api(ann).get(f"/api/workspaces/{workspace.pk}/file", {"path": path})
    assert answer.status_code == 400 and answer.json()["field"] == "path"


def test_the_plain_paths_still_work(ann, workspace):
    entry_push(workspace=workspace, docs=[{"path": "note.txt"}, {"path": "sub/deep.txt"}])
    answer = _api(ann).get(f"/api/workspaces/{workspace.pk}/file", {"path": "sub/deep.txt"})
    assert answer.status_code == 200


def test_a_root_swapped_for_a_symlink_is_refused(ann, workspace, folder, tmp_path):
    entry = entry_push(workspace=workspace, docs=[{"path": "note.txt"}])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "note.txt").write_text("someone else's secret")
    os.rename(folder, tmp_path / "moved")
    os.symlink(elsewhere, folder)  # the root itself is now a link to another folder

    answer = _api(ann).get(f"/api/workspaces/{workspace.pk}/file", {"path": "note.txt"})
    assert answer.status_code == 400
    assert "workspace folder was replaced" in answer.json()["message"]
    assert b"secret" not in answer.content
    client = Client()
    client.force_login(ann)
    page = client.get(f"/inbox/entries/{entry.pk}").content.decode()
    assert "workspace folder was replaced" in page and "secret" not in page
    with pytest.raises(EntryInvalid, match="workspace folder was replaced"):
        entry_push(workspace=workspace, docs=[{"path": "note.txt"}])
    # A folder put back in place is another folder too (a new inode).
    os.remove(folder)
    folder.mkdir()
    (folder / "note.txt").write_text("a new note")
    again = _api(ann).get(f"/api/workspaces/{workspace.pk}/file", {"path": "note.txt"})
    assert again.status_code == 400


def test_the_roots_identity_is_recorded_when_the_workspace_is_made(workspace, folder):
    info = os.stat(folder)
    assert workspace.root_identity == (info.st_dev, info.st_ino)
