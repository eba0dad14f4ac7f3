"""A websocket its client closed normally is not a warning in the server's log (issue 34:
one warning line per event for every such socket)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.api.liveserver import LiveServer

pytestmark = pytest.mark.apart  # mostly waits on its own Daphne

PASSWORD = "pw-quiet-123456"


@pytest.fixture(scope="module", params=["daphne"])
def served(request) -> Iterator[dict]:
    with LiveServer(server=request.param) as live:
        live.add_user("quiet", PASSWORD)
        token = live.token_for("quiet")
        with httpx.Client(base_url=live.url, timeout=30) as http:
            page = http.get("/accounts/login/")
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]
            http.post(
                "/accounts/login/",
                data={"username": "quiet", "password": PASSWORD, "csrfmiddlewaretoken": csrf},
                headers={"Referer": f"{live.url}/accounts/login/"},
            )
            cookie = f"sessionid={http.cookies['sessionid']}"
            session = http.post(
                "/api/sessions", json={}, headers={"Authorization": f"Token {token}"}
            ).json()["sessionId"]
        yield {"live": live, "cookie": cookie, "token": token, "session": session}


async def test_sockets_closed_normally_leave_no_warning(served):
    live = served["live"]
    url = live.url.replace("http://", "ws://") + f"/ws/sessions/{served['session']}/"
    headers = {"Origin": live.url, "Cookie": served["cookie"]}
    auth = {"Authorization": f"Token {served['token']}"}
    before = len(live.log_tail(5_000_000))
    async with httpx.AsyncClient(base_url=live.url, timeout=30, headers=auth) as http:
        for round_ in range(3):
            async with connect(url, additional_headers=headers, open_timeout=30) as socket:
                await http.put(
                    f"/api/sessions/{served['session']}/tasks",
                    json={"tasks": [{"id": f"t{round_}", "content": "x", "status": "pending"}]},
                )
                await asyncio.wait_for(socket.recv(), 20)  # an event came: the socket is live
            # Events keep coming for the closed socket's session.
            for n in range(3):
                await http.put(
                    f"/api/sessions/{served['session']}/tasks",
                    json={"tasks": [{"id": f"u{round_}{n}", "content": "y", "status": "pending"}]},
                )
    await asyncio.sleep(1.0)

    log = live.log_tail(5_000_000)[before:]
    warnings = [
        line for line in log.splitlines() if "WARNING" in line.upper() or "Traceback" in line
    ]
    assert warnings == [], log[-4000:]
