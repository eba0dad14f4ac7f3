"""The inbox page, its partials, replies and live socket: the owner's, and nobody else's."""

from __future__ import annotations

import json
import os
import re

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from gloveapp.asgi import application
from gloveapp.conversations.models import Session
from gloveapp.live.relay import stop_relay
from gloveapp.turns.models import Turn
from inbox.workspaces.services import (
    entry_delete,
    entry_mark_read,
    entry_push,
    entry_reply,
    workspace_create,
    workspace_set_agent,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]
FRAME_TIMEOUT = 10


@pytest.fixture(autouse=True)
async def _stop_relay_after_test():
    yield
    await stop_relay()


@pytest.fixture
def ann(db):
    return get_user_model().objects.create_user("ann", password="pw-ann-123456")


@pytest.fixture
def bob(db):
    return get_user_model().objects.create_user("bob", password="pw-bob-123456")


@pytest.fixture
def folder(tmp_path):
    root, outside = tmp_path / "ws", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "report.md").write_text("# Report\n\n<script>alert(1)</script>**bold**\n")
    (root / "page.html").write_text('<p onclick="x()">hi</p><script>alert(2)</script>')
    (root / "big.txt").write_bytes(b"a" * ((1 << 20) + 10))
    (outside / "secret.txt").write_text("top secret")
    return root, outside


@pytest.fixture
def workspace(ann, folder):
    workspace, _ = workspace_create(label="Macro", root=str(folder[0]), owner=ann)
    return workspace


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_it_renders_docs_live_sanitised_and_explains_what_it_cannot_show(workspace, folder, ann):
    root, outside = folder
    entry = entry_push(
        workspace=workspace,
        docs=[{"path": "report.md"}, {"path": "page.html"}, {"path": "big.txt"}],
        comments="See *this*",
    )
    # Docs are pointers: an edit after the push shows on the next read.
    (root / "report.md").write_text("# Report v2\n\n<script>alert(1)</script>\n\n**bold**\n")
    html = login(ann).get(f"/inbox/entries/{entry.pk}").content.decode()
    assert "<h1>Report v2</h1>" in html
    assert "<strong>bold</strong>" in html
    assert "<script>" not in html and "onclick" not in html
    assert "File too large to show in the inbox" in html
    # Over the render cap, under the download cap: offered as a streamed download.
    assert "Download big.txt" in html and "path=big.txt" in html
    # A file replaced by a symlink leading outside, then a file removed.
    os.remove(root / "page.html")
    os.symlink(outside / "secret.txt", root / "page.html")
    html = login(ann).get(f"/inbox/entries/{entry.pk}").content.decode()
    assert "Invalid path" in html and "top secret" not in html
    os.remove(root / "report.md")
    html = login(ann).get(f"/inbox/entries/{entry.pk}").content.decode()
    assert "File not found at this path" in html


def test_another_user_cannot_open_reply_to_or_see_the_entry(workspace, ann, bob):
    entry = entry_push(workspace=workspace, comments="private plans")
    intruder = login(bob)
    assert intruder.get(f"/inbox/entries/{entry.pk}").status_code == 404
    assert intruder.get(f"/inbox/entries/{entry.pk}?part=row").status_code == 404
    assert intruder.post(f"/inbox/entries/{entry.pk}/reply", {"text": "hi"}).status_code == 404
    assert intruder.post(f"/inbox/entries/{entry.pk}/read").status_code == 404
    page = intruder.get(f"/inbox/?entry={entry.pk}").content.decode()
    assert "private plans" not in page
    assert login(ann).get(f"/inbox/?entry={entry.pk}").content.decode().count("private plans")


def test_the_badge_counts_unread_entries_and_opening_one_reads_it(workspace, ann):
    first = entry_push(workspace=workspace, comments="one")
    entry_push(workspace=workspace, comments="two")
    client = login(ann)
    assert 'data-count="2"' in client.get("/").content.decode()
    # Opening shows the entry and changes nothing (a GET); its detail POSTs the read mark.
    page = client.get(f"/inbox/?entry={first.pk}").content.decode()
    assert 'data-count="2"' in client.get("/").content.decode()
    read_url = f"/inbox/entries/{first.pk}/read"
    assert f'hx-post="{read_url}" hx-trigger="load"' in page
    assert client.post(read_url, HTTP_HX_REQUEST="true").status_code == 200
    assert 'data-count="1"' in client.get("/").content.decode()
    assert read_url not in client.get(f"/inbox/?entry={first.pk}").content.decode()
    # Without JavaScript the button posts and comes back to the entry.
    answer = client.post(read_url)
    assert answer.status_code == 303 and answer["Location"] == f"/inbox/?entry={first.pk}"


def test_a_reply_is_stored_on_the_entrys_thread_and_shown_under_it(workspace, ann):
    entry = entry_push(workspace=workspace, comments="Which index?")
    client = login(ann)

    response = client.post(f"/inbox/entries/{entry.pk}/reply", {"text": "Use a B-tree."})
    empty = client.post(f"/inbox/entries/{entry.pk}/reply", {"text": "  "})

    assert response.status_code == 303
    assert response["Location"] == f"/inbox/?entry={entry.pk}"
    assert empty.status_code == 400 and b"text:" in empty.content
    html = client.get(f"/inbox/entries/{entry.pk}").content.decode()
    thread = html.split('class="thread"')[1]
    assert "Use a B-tree." in thread and "waiting for the workspace" in thread
    # Nothing went to a chat: the workspace's own agent (its MCP client) reads it.
    assert not Session.objects.filter(owner=ann).exists()


def test_a_reply_goes_to_the_server_agent_the_workspace_names(workspace, ann):
    workspace_set_agent(workspace=workspace, agent_name="coffee")
    entry = entry_push(workspace=workspace, comments="Which index?")

    login(ann).post(f"/inbox/entries/{entry.pk}/reply", {"text": "Use a B-tree."})
    login(ann).post(f"/inbox/entries/{entry.pk}/reply", {"text": "Or a hash."})

    session = Session.objects.get(owner=ann)  # one session per workspace
    assert session.agent_name == "coffee"
    texts = list(Turn.objects.filter(session=session).values_list("text", flat=True))
    assert len(texts) == 2 and texts[0].endswith("Use a B-tree.")
    assert "Which index?" in texts[0]  # the entry, quoted
    html = login(ann).get(f"/inbox/entries/{entry.pk}").content.decode()
    assert html.count("sent to coffee") == 2


def test_a_workspace_cannot_name_an_agent_the_server_does_not_have(workspace):
    with pytest.raises(ValueError, match="agent: no agent named 'nope'"):
        workspace_set_agent(workspace=workspace, agent_name="nope")


def test_a_reply_past_the_turn_limit_is_a_429_and_counts_as_the_users_turn(
    workspace, ann, settings
):
    settings.GLOVE_TURNS_PER_USER_PER_MINUTE = 2
    workspace_set_agent(workspace=workspace, agent_name="coffee")
    entry = entry_push(workspace=workspace, comments="Which index?")
    client = login(ann)

    answers = [
        client.post(f"/inbox/entries/{entry.pk}/reply", {"text": f"Use B-tree {n}"}).status_code
        for n in range(4)
    ]

    assert answers == [303, 303, 429, 429]


def _cookie(user) -> str:
    return f"sessionid={login(user).cookies['sessionid'].value}"


def _socket(workspace_id: str, cookie: str, last_event_id: int = 0) -> WebsocketCommunicator:
    return WebsocketCommunicator(
        application,
        f"/ws/workspaces/{workspace_id}/?last_event_id={last_event_id}",
        headers=[(b"origin", b"http://testserver"), (b"cookie", cookie.encode())],
    )


async def test_the_owners_socket_hears_pushes_and_deletes_and_nobody_elses_does(
    workspace, ann, bob
):
    cookie = await database_sync_to_async(_cookie)(ann)
    intruder_cookie = await database_sync_to_async(_cookie)(bob)
    refused = _socket(workspace.pk, intruder_cookie)
    connected, _ = await refused.connect(timeout=FRAME_TIMEOUT)
    assert (await refused.receive_output(timeout=FRAME_TIMEOUT))["code"] == 4404
    unknown = _socket("ws-nope", cookie)
    await unknown.connect(timeout=FRAME_TIMEOUT)
    assert (await unknown.receive_output(timeout=FRAME_TIMEOUT))["code"] == 4404

    communicator = _socket(workspace.pk, cookie)
    connected, _ = await communicator.connect(timeout=FRAME_TIMEOUT)
    assert connected
    entry = await database_sync_to_async(entry_push)(workspace=workspace, comments="live!")
    frame = await communicator.receive_json_from(timeout=FRAME_TIMEOUT)
    assert frame["type"] == "workspace.entry.pushed"
    assert frame["payload"]["entry"]["comments"] == "live!"
    await database_sync_to_async(entry_delete)(entry=entry)
    frame = await communicator.receive_json_from(timeout=FRAME_TIMEOUT)
    assert frame == {
        "id": frame["id"],
        "type": "workspace.entry.deleted",
        "payload": {"id": str(entry.pk)},
    }
    await communicator.disconnect()


def test_legacy_notifications_are_listed_for_their_user_only(workspace, ann, bob):
    from inbox.workspaces.services import notification_create

    notification_create(user=ann, text="Nightly cron finished", source="cron")
    page = login(ann).get("/notifications/").content.decode()
    assert "Nightly cron finished" in page
    assert "Nightly cron finished" not in login(bob).get("/notifications/").content.decode()


def test_the_seed_route_appends_an_entry_only_in_debug(workspace, ann, bob, settings):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(ann)
    body = {"workspaceId": workspace.pk, "comments": "seeded"}
    assert api.post("/api/inbox/seed", body, format="json").status_code == 404
    settings.DEBUG = True
    seeded = api.post("/api/inbox/seed", body, format="json")
    assert seeded.status_code == 200
    assert seeded.json()["entry"]["comments"] == "seeded"
    bad = api.post("/api/inbox/seed", {"workspaceId": workspace.pk}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "docs"
    intruder = APIClient()
    intruder.force_authenticate(bob)
    refused = intruder.post("/api/inbox/seed", body, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "workspaceId"
    # An id no row can have is not sent to the database (a lone surrogate was a 500 there).
    for odd in ("\ud800", "ws\x00", "w" * 65):
        raw = json.dumps({"workspaceId": odd})  # escaped: the test client cannot encode it
        hostile = api.post("/api/inbox/seed", raw, content_type="application/json")
        assert hostile.status_code == 400 and hostile.json()["field"] == "workspaceId", odd


def test_the_routes_are_in_the_openapi_schema(ann):
    schema = login(ann).get("/api/schema/", HTTP_ACCEPT="application/json").json()
    for path in [
        "/api/inbox/history",
        "/api/inbox/seed",
        "/api/inbox/{entry_id}",
        "/api/inbox/{entry_id}/read",
        "/api/workspaces/{workspace_id}/file",
        "/api/inbox/resolve",
    ]:
        assert path in schema["paths"], path


def test_an_entry_explains_a_file_too_large_to_download_and_links_to_nothing(
    workspace, folder, ann, settings
):
    settings.GLOVE_WORKSPACE_DOWNLOAD_MAX_BYTES = 1 << 20
    entry = entry_push(workspace=workspace, docs=[{"path": "big.txt"}])

    html = login(ann).get(f"/inbox/entries/{entry.pk}").content.decode()

    assert "File too large to show or download here (1.0 MB; downloads stop at 1.0 MB)" in html
    assert "path=big.txt" not in html


PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


def test_markdown_keeps_soft_breaks_and_shows_relative_images_through_the_file_route(
    workspace, folder, ann
):
    root, outside = folder
    (root / "docs" / "shots").mkdir(parents=True)
    (root / "docs" / "shots" / "chat.png").write_bytes(PNG)
    (outside / "private.png").write_bytes(PNG)
    (root / "docs" / "guide.md").write_text(
        "A paragraph wrapped\nover two lines.\n\n"
        "![the chat](shots/chat.png)\n\n"
        "![escape](../../outside/private.png)\n\n"
        '<img src="shots/chat.png" onerror="alert(1)">\n'
    )
    entry = entry_push(workspace=workspace, docs=[{"path": "docs/guide.md"}], comments="Guide")
    client = login(ann)
    html = client.get(f"/inbox/entries/{entry.pk}").content.decode()

    # A soft line break is a soft break, as Markdown means it: one paragraph, no <br>.
    assert "<p>A paragraph wrapped\nover two lines.</p>" in html
    # A relative image resolves against the doc's folder, through the workspace's file route.
    src = re.search(r'<img src="([^"]+)" alt="the chat"', html)[1]
    assert "path=docs/shots/chat.png" in src
    image = client.get(src.replace("&amp;", "&"))
    assert image.status_code == 200 and image["Content-Type"] == "image/png"
    # One leading outside the root is not followed (its alt text stays); still sanitised.
    assert "private.png" not in html and "escape" in html
    assert "onerror" not in html


def _row_texts(html: str) -> dict[str, str]:
    return {
        found.group(1): " ".join(re.sub(r"<[^>]+>", " ", found.group(2)).split())
        for found in re.finditer(
            r'<li class="inbox-row[^"]*" data-id="([^"]+)"[^>]*>(.*?)</li>', html, re.S
        )
    }


def test_rows_carry_a_subject_and_the_list_filters_unread_and_answered(workspace, folder, ann):
    (folder[0] / "notes").mkdir()
    (folder[0] / "notes" / "weekly.md").write_text("# Weekly\n")
    plain = entry_push(workspace=workspace, comments="## Rates held\nThe FOMC kept rates.")
    only_docs = entry_push(workspace=workspace, docs=[{"path": "notes/weekly.md"}])
    answered = entry_push(workspace=workspace, comments="Can you check the Q3 numbers?")
    entry_mark_read(entry=plain, user=ann)
    entry_reply(entry=answered, author=ann, text="Done, they match.")
    client = login(ann)

    rows = _row_texts(client.get("/inbox/").content.decode())
    # The subject: the comment's first line, else the doc's name; then the workspace's label.
    assert rows[str(plain.pk)].startswith("Rates held")
    assert "Macro · The FOMC kept rates." in rows[str(plain.pk)]
    assert rows[str(only_docs.pk)].startswith("weekly.md")
    assert "Macro · 📄 notes/weekly.md" in rows[str(only_docs.pk)]

    unread = _row_texts(client.get("/inbox/?show=unread").content.decode())
    assert set(unread) == {str(only_docs.pk), str(answered.pk)}
    shown = _row_texts(client.get("/inbox/?show=answered").content.decode())
    assert set(shown) == {str(answered.pk)}
    more = client.get("/inbox/?part=rows&show=answered").content.decode()
    assert set(_row_texts(more)) == {str(answered.pk)}
    # An unknown filter shows everything.
    assert len(_row_texts(client.get("/inbox/?show=nope").content.decode())) == 3


def test_the_page_renders_each_workspaces_own_cursor(workspace, folder, ann, bob):
    # Event ids count per stream: each socket resumes from its workspace's own number, and
    # another user's activity never moves it.
    second, _ = workspace_create(label="Notes", root=str(folder[0]), owner=ann)
    theirs, _ = workspace_create(label="Bob's", root=str(folder[0]), owner=bob)
    for _ in range(3):
        entry_push(workspace=theirs, comments="not yours")
    entry_push(workspace=workspace, comments="one")
    entry_push(workspace=workspace, comments="two")

    html = login(ann).get("/inbox/").content.decode()

    [cursors] = re.findall(r'data-last-event-ids="([^"]*)"', html)
    assert json.loads(cursors.replace("&quot;", '"')) == {str(workspace.pk): 2, str(second.pk): 0}
