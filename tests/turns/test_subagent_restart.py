"""A lead agent delegates to a subagent on a real turn worker; the worker is killed while the
child's turn waits on the customer; the other worker takes the turn back, the child resumes
from its stored conversation, and the parent receives exactly one answer."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from tests.api.liveserver import LiveServer
from tests.turns.test_processes import (
    PG_URL,
    Browser,
    query,
    wait_for,
    wait_idle,
    waiting_prompt,
)

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]

PASSWORD = "pw-ann-processes-1"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LiveServer]:
    if not PG_URL.startswith("postgres"):
        pytest.skip("runs in the PostgreSQL pass (DATABASE_URL=postgres://...)")
    env = {
        "DJANGO_SETTINGS_MODULE": "tests.agents.subagent_settings",
        "GLOVE_DEFAULT_AGENT": "lead",
        "GLOVE_TURN_LEASE_SECONDS": "2",
        "GLOVE_TURN_DB_THREADS": "2",
    }
    with LiveServer(database_url=PG_URL, extra_env=env) as server:
        server.add_user("ann", PASSWORD)
        server.start_worker()
        server.start_worker()
        yield server


def test_it_gives_the_parent_one_answer_when_the_worker_dies_during_the_childs_turn(cluster):
    ann = Browser(cluster)
    session_id = ann.new_session()
    ann.say(session_id, "Please roast the Kenya AA")
    slot_id, worker_id, attempts = waiting_prompt(cluster, session_id)
    [(child_id,)] = wait_for(
        cluster, "SELECT id FROM conversations_session WHERE parent_id = %s", session_id
    )

    pid = int(worker_id.split(":")[1])
    victim = next(w for w in cluster.workers if w.pid == pid)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    slot_id, new_worker, attempts = waiting_prompt_after(cluster, session_id, attempts)
    ann.post(f"/sessions/{session_id}/slots/{slot_id}", {"value": "dark"})
    wait_idle(cluster, session_id)

    assert new_worker != worker_id and attempts == 2
    results = query(
        cluster,
        "SELECT r->'result' FROM conversations_message m, "
        "jsonb_array_elements(m.tool_results) r WHERE m.session_id = %s "
        "AND r->>'tool_name' = 'glove_invoke_subagent'",
        session_id,
    )
    assert results == [
        (
            {
                "status": "success",
                "data": {"subagent": "roaster", "content": "Roasted (roast: dark)."},
            },
        )
    ]
    replies = query(
        cluster,
        "SELECT text FROM conversations_message WHERE session_id = %s AND sender = 'agent' "
        "AND text <> '' ORDER BY seq",
        session_id,
    )
    assert replies == [("The roaster says: Roasted (roast: dark).",)]
    children = query(
        cluster, "SELECT id FROM conversations_session WHERE parent_id = %s", session_id
    )
    assert children == [(child_id,)]
    child_texts = query(
        cluster,
        "SELECT sender, text FROM conversations_message WHERE session_id = %s "
        "AND text NOT IN ('', 'tool results') ORDER BY seq",
        child_id,
    )
    assert child_texts == [("user", "Roast the Kenya AA."), ("agent", "Roasted (roast: dark).")]


def waiting_prompt_after(server: LiveServer, session_id: str, attempts: int) -> tuple:
    """The open prompt of the turn once another worker has taken it back."""
    wait_for(
        server,
        "SELECT 1 FROM turns_turn WHERE session_id = %s AND attempts > %s AND status = 'running'",
        session_id,
        attempts,
    )
    return waiting_prompt(server, session_id)
