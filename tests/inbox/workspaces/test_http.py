"""The REST routes of the workspace inbox, against a real server: history, read state,
delete, the dev seed route and the file route, each scoped to the entry's owner."""

from __future__ import annotations

import os

import httpx
import pytest

from tests.inbox.workspaces.test_mcp import call, result_json

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.postgres,
    pytest.mark.asyncio(loop_scope="module"),
]


def client(live, who: str) -> httpx.AsyncClient:
    return live["server"].client(headers={"Authorization": f"Token {live[who].owner_token}"})


async def push(live, who: str, **arguments) -> str:
    return result_json(await call(live[who], "inbox_push", arguments))["entryId"]


async def test_it_pages_history_newest_first_with_a_keyset_cursor(live):
    ids = [await push(live, "ann", comments=f"entry {n}") for n in range(5)]
    async with client(live, "ann") as http:
        first = (await http.get("/api/inbox/history", params={"limit": 2})).json()
        assert [e["id"] for e in first["entries"]] == ids[::-1][:2]
        assert first["hasMore"] is True
        second = (
            await http.get("/api/inbox/history", params={"limit": 2, "before": ids[3]})
        ).json()
        assert [e["id"] for e in second["entries"]] == [ids[2], ids[1]]
        scoped = await http.get("/api/inbox/history", params={"workspaceId": live["ann"].id})
        assert all(e["workspaceId"] == live["ann"].id for e in scoped.json()["entries"])


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": "abc"}, "limit"),
        ({"limit": "0"}, "limit"),
        ({"limit": "-3"}, "limit"),
        ({"before": "not-a-uuid"}, "before"),
        ({"before": "00000000-0000-4000-8000-000000000000"}, "before"),
        ({"workspaceId": "ws-nope"}, "workspaceId"),
    ],
)
async def test_it_answers_a_bad_parameter_with_a_400_naming_it(live, params, field):
    async with client(live, "ann") as http:
        response = await http.get("/api/inbox/history", params=params)
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert response.json()["error"].startswith(field)


async def test_another_user_never_sees_or_touches_the_entry(live):
    entry_id = await push(live, "ann", docs=[{"path": "research/report.md"}])
    async with client(live, "bob") as http:
        listed = (await http.get("/api/inbox/history")).json()["entries"]
        assert entry_id not in [e["id"] for e in listed]
        assert (
            await http.get("/api/inbox/history", params={"before": entry_id})
        ).status_code == 400
        scoped = await http.get("/api/inbox/history", params={"workspaceId": live["ann"].id})
        assert scoped.status_code == 400
        assert (await http.put(f"/api/inbox/{entry_id}/read")).status_code == 404
        assert (await http.delete(f"/api/inbox/{entry_id}")).status_code == 404
        file = await http.get(
            f"/api/workspaces/{live['ann'].id}/file", params={"path": "research/report.md"}
        )
        assert file.status_code == 404
        page = await http.get(f"/inbox/entries/{entry_id}")
        assert page.status_code in (302, 404)  # not logged in through the page: no content
        assert "Report" not in page.text
    async with client(live, "ann") as http:
        listed = (await http.get("/api/inbox/history")).json()["entries"]
        assert entry_id in [e["id"] for e in listed]


async def test_read_state_round_trips_through_history(live):
    entry_id = await push(live, "ann", comments="read me")
    async with client(live, "ann") as http:
        marked = await http.put(f"/api/inbox/{entry_id}/read")
        assert marked.status_code == 200
        entry = (await http.get("/api/inbox/history")).json()["entries"][0]
        assert entry["id"] == entry_id and entry["readAt"] == marked.json()["readAt"]
        assert (await http.delete(f"/api/inbox/{entry_id}/read")).status_code == 204
        entry = (await http.get("/api/inbox/history")).json()["entries"][0]
        assert entry["readAt"] is None


async def test_delete_answers_204_then_404(live):
    entry_id = await push(live, "ann", comments="delete me")
    async with client(live, "ann") as http:
        assert (await http.delete(f"/api/inbox/{entry_id}")).status_code == 204
        assert (await http.delete(f"/api/inbox/{entry_id}")).status_code == 404
        assert (await http.delete("/api/inbox/not-a-uuid")).status_code == 404
        listed = (await http.get("/api/inbox/history")).json()["entries"]
        assert entry_id not in [e["id"] for e in listed]


async def test_the_seed_route_is_off_without_debug_and_resolve_still_routes(live):
    async with client(live, "ann") as http:
        seeded = await http.post(
            "/api/inbox/seed", json={"workspaceId": live["ann"].id, "comments": "x"}
        )
        assert seeded.status_code == 404
        # The Glove inbox's webhook keeps its route (non-staff callers are refused there).
        assert (await http.post("/api/inbox/resolve", json={})).status_code == 403


async def test_the_file_route_streams_a_workspace_file(live):
    async with client(live, "ann") as http:
        response = await http.get(
            f"/api/workspaces/{live['ann'].id}/file", params={"path": "research/report.md"}
        )
    assert response.status_code == 200
    assert response.text == "# Report\n\nAll **done**.\n"
    assert response.headers["content-disposition"].startswith("attachment")
    assert response.headers["x-content-type-options"] == "nosniff"


async def test_the_file_route_serves_images_inline_and_binaries_as_attachments(live):
    root = live["ann"].root
    (root / "chart.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 32)
    (root / "data.bin").write_bytes(b"\x00\x01\x02")
    (root / "data.pdf").write_bytes(b"%PDF-1.4\n")
    async with client(live, "ann") as http:
        base = f"/api/workspaces/{live['ann'].id}/file"
        image = await http.get(base, params={"path": "chart.png"})
        binary = await http.get(base, params={"path": "data.bin"})
        pdf = await http.get(base, params={"path": "data.pdf"})
    assert image.headers["content-type"] == "image/png"
    assert image.headers["content-disposition"].startswith("inline")
    assert binary.headers["content-type"] == "application/octet-stream"
    assert binary.headers["content-disposition"] == (
        "attachment; filename=\"data.bin\"; filename*=UTF-8''data.bin"
    )
    assert binary.content == b"\x00\x01\x02"
    assert pdf.headers["content-type"] == "application/pdf"


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("../outside/secret.txt", 400),
        ("research/../../outside/secret.txt", 400),
        ("/etc/passwd", 400),
        ("escape.txt", 400),
        ("%2e%2e/outside/secret.txt", 400),
        ("notes.txt\x00.md", 400),
        ("missing.md", 404),
        ("research", 404),
        ("", 400),
    ],
)
async def test_the_file_route_refuses_paths_outside_the_workspace(live, path, status):
    async with client(live, "ann") as http:
        response = await http.get(f"/api/workspaces/{live['ann'].id}/file", params={"path": path})
    assert response.status_code == status
    assert "top secret" not in response.text


async def test_the_file_route_refuses_a_file_swapped_for_an_escaping_symlink(live):
    root = live["ann"].root
    (root / "later.md").write_text("fine")
    entry_id = await push(live, "ann", docs=[{"path": "later.md"}])
    (root / "later.md").unlink()
    (root / "later.md").symlink_to(live["outside"] / "secret.txt")
    async with client(live, "ann") as http:
        response = await http.get(
            f"/api/workspaces/{live['ann'].id}/file", params={"path": "later.md"}
        )
        assert response.status_code == 400
        assert entry_id in [
            e["id"] for e in (await http.get("/api/inbox/history")).json()["entries"]
        ]


async def test_the_file_route_streams_a_file_over_the_render_cap(live):
    (live["ann"].root / "big.txt").write_bytes(b"a" * ((1 << 20) + 1))
    async with client(live, "ann") as http:
        response = await http.get(
            f"/api/workspaces/{live['ann'].id}/file", params={"path": "big.txt"}
        )
    assert response.status_code == 200
    assert len(response.content) == (1 << 20) + 1


async def test_the_file_route_refuses_a_file_over_the_download_cap(live):
    size = (100 << 20) + 1  # GLOVE_WORKSPACE_DOWNLOAD_MAX_BYTES's default, and a byte
    (live["ann"].root / "huge.bin").touch()
    os.truncate(live["ann"].root / "huge.bin", size)  # sparse: nothing is written
    async with client(live, "ann") as http:
        response = await http.get(
            f"/api/workspaces/{live['ann'].id}/file", params={"path": "huge.bin"}
        )
    assert response.status_code == 413
    assert response.json()["sizeBytes"] == size


async def test_odd_bytes_in_ids_are_a_4xx_never_a_5xx(live):
    async with client(live, "ann") as http:
        for params in ({"workspaceId": "ws\x00x"}, {"before": "\x00"}, {"limit": "\x00"}):
            assert (await http.get("/api/inbox/history", params=params)).status_code == 400
        assert (
            await http.get("/api/workspaces/ws%00x/file", params={"path": "a"})
        ).status_code == 404
        assert (await http.delete("/api/inbox/%00")).status_code == 404


@pytest.mark.parametrize(
    ("name", "fallback", "encoded"),
    [
        ("\ufb01.html", "fi.html", "%EF%AC%81.html"),  # issue 22's ﬁ.html
        ("r\u00e9sum\u00e9.svg", "resume.svg", "r%C3%A9sum%C3%A9.svg"),
        ("feed.xml", "feed.xml", "feed.xml"),
        ("page.xhtml", "page.xhtml", "page.xhtml"),
        ('a "quoted" name.htm', "a _quoted_ name.htm", "a%20%22quoted%22%20name.htm"),
    ],
)
async def test_markup_is_always_a_download_under_any_name(live, name, fallback, encoded):
    root = live["ann"].root
    (root / name).write_text("<html><script>alert(document.domain)</script></html>")
    async with client(live, "ann") as http:
        response = await http.get(f"/api/workspaces/{live['ann'].id}/file", params={"path": name})
    assert response.status_code == 200
    assert response.headers["content-disposition"] == (
        f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}"
    )
    assert response.headers["content-type"] == "application/octet-stream"
    assert response.headers["x-content-type-options"] == "nosniff"
