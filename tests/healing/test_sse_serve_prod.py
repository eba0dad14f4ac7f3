"""An SSE stream whose serving process is killed mid-turn resumes with `Last-Event-ID`.

Under `make serve-prod` the ASGI server (uvicorn, beside the websockets) serves the event
stream and granian (WSGI) the REST routes, as the production proxy routes them: a
customer's client follows a checkout over Server-Sent Events; while the turn waits on its
"Confirm your order" slot, every uvicorn worker is SIGKILLed (uvicorn respawns them). The
slot is answered over REST once the server answers again, and the Python client, which
resumes by itself from the last event id it saw, reads the rest: every stored event of the
turn exactly once, in order, and the order placed once. On PostgreSQL through PgBouncer in
transaction mode (the relays LISTEN directly), as production runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import httpx
import pytest

from gloveapp.remote.agent_client import AgentApiError, AgentClient
from tests.api.liveserver import PYTHON, ROOT, LiveServer
from tests.healing.serve_prod import ServeProd
from tests.servers import through_pgbouncer

pytestmark = [pytest.mark.faults, pytest.mark.timeout(400)]


def manage(stack: ServeProd, *args: str) -> str:
    run = subprocess.run(
        [PYTHON, "manage.py", *args],
        cwd=ROOT,
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def answer_when_back(glove: AgentClient, session_id: str, slot_id: str) -> None:
    """The HTTP workers are coming back: retry the answer until one is served (bounded)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            glove.answer_slot(session_id, slot_id, {"confirmed": True})
            return
        except AgentApiError as refused:
            if refused.status < 500:
                raise
        except Exception:  # refused or dropped while granian respawns its workers
            pass
        assert time.monotonic() < deadline, "the HTTP workers did not come back"
        time.sleep(0.2)


def test_a_stream_resumes_once_and_in_order_after_its_serving_process_is_killed(
    postgres, pgbouncer
):
    database = LiveServer(database_url=postgres.url())  # its migrated database only
    database._create_migrated_database()
    # Two of each: with one, granian and uvicorn serve from their master (nothing to kill).
    stack = ServeProd(
        database_url=database.database_url, http_workers=2, ws_workers=2, turn_workers=1
    )
    through_pgbouncer(stack, pgbouncer)
    stack.start()
    try:
        token = manage(stack, "create_api_token", "sse-customer", "--create-user").strip()
        with AgentClient(stack.url, token=token, timeout=10, stream_url=stack.ws_url) as glove:
            session_id = glove.create_session(agent="coffee")
            # The WSGI server holds no thread per stream: it says where the stream is.
            refused = httpx.get(
                f"{stack.url}/api/sessions/{session_id}/events",
                headers={"Authorization": f"Token {token}"},
                timeout=30,
            )
            assert refused.status_code == 421
            first = glove.start_turn(session_id, "add 2 Kenya AA")
            list(glove.stream(session_id, since=first["lastEventId"], until_turn=first["turnId"]))

            turn = glove.start_turn(session_id, "checkout, I'll pay at pickup")
            seen = []
            killed: list[int] = []
            for event in glove.stream(
                session_id, since=turn["lastEventId"], until_turn=turn["turnId"]
            ):
                seen.append(event)
                if event.type == "slot.pushed" and not killed:
                    killed = stack.websocket_workers()
                    assert killed
                    for pid in killed:
                        os.kill(pid, signal.SIGKILL)
                    answer_when_back(glove, session_id, event.payload["slot_id"])

            everything = list(
                glove.stream(session_id, since=turn["lastEventId"], until_turn=turn["turnId"])
            )
            orders = manage(
                stack,
                "shell",
                "-c",
                "from gloveapp.demo.models import Order; "
                f"print(Order.objects.filter(session__key={session_id!r}).count())",
            ).split()[-1]
    finally:
        stack.stop()
        database.stop()

    stored = [event.id for event in everything if event.id is not None]
    assert [event.id for event in seen if event.id is not None] == stored
    assert everything[-1].type == "turn.finished" and "is placed" in everything[-1].payload["text"]
    assert orders == "1"
