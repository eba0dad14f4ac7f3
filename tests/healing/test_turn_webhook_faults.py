"""A turn's completion webhook arrives exactly once per turn end while the turn worker is
SIGKILLed mid-work and PostgreSQL restarts; the receiver checks every signature and counts.

A server and a worker on a PostgreSQL of the run's own: turns are started with a webhook,
the worker is killed with turns running, PostgreSQL restarts (every connection cut), more
turns start, a second worker takes over (the dead one's turns come back when their lease
runs out). Every turn ends, and the receiver has each turn's end once, signed, no more.
"""

from __future__ import annotations

import os
import signal
import time

import httpx
import pytest

from tests.api.liveserver import LiveServer
from tests.webhook_receiver import Receiver

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]

SECRET = "turn-webhook-fault-secret"
TURNS_BEFORE = 6
TURNS_AFTER = 3


def _start_turns(http: httpx.Client, receiver: Receiver, first: int, count: int) -> list[int]:
    started = []
    for n in range(first, first + count):
        session = f"hook-{n}"
        # Retried after the restart: a session made before is there, a start made before
        # is answered again (its key).
        made = http.post("/api/sessions", json={"sessionId": session})
        assert made.status_code in (201, 409), made.text
        response = http.post(
            f"/api/sessions/{session}/agent/turns",
            json={"text": "Do you have Kenya AA?", "webhook": receiver.url},
            headers={"Idempotency-Key": f"start-{session}"},
        )
        assert response.status_code == 202, response.text
        started.append(response.json()["turnId"])
    return started


def test_every_turn_end_is_told_once_through_a_worker_kill_and_a_database_restart(postgres):
    receiver = Receiver(SECRET)
    env = {
        "REDIS_URL": "",
        "GLOVE_TURN_WEBHOOK_SECRET": SECRET,
        # The dead worker's turns come back soon; the scheduler delivers often.
        "GLOVE_TURN_LEASE_SECONDS": "3",
        "GLOVE_APPROVAL_SWEEP_SECONDS": "0.5",
    }
    try:
        with LiveServer(database_url=postgres.url(), extra_env=env) as server:
            server.manage("setup_demo")
            token = server.token_for("hooked")
            headers = {"Authorization": f"Token {token}"}
            with httpx.Client(base_url=server.url, headers=headers, timeout=60) as http:
                first = server.start_worker()
                turns = _start_turns(http, receiver, 0, TURNS_BEFORE)
                # Killed as soon as it has taken work: some turns end, some are running.
                _until(lambda: len(receiver.deliveries) >= 1, "the first delivery")
                os.kill(first.pid, signal.SIGKILL)
                first.wait()
                postgres.restart()
                turns += _until_started(http, receiver)
                server.start_worker()
                _until(
                    lambda: len(receiver.counted()) >= len(turns),
                    f"{len(turns)} deliveries",
                    seconds=180,
                )
                time.sleep(3)  # anything sent twice would arrive by now
                states = {
                    turn: http.get(f"/api/sessions/hook-{n}/agent/turns/{turn}").json()["state"]
                    for n, turn in enumerate(turns)
                }
    finally:
        receiver.close()
    assert set(states.values()) == {"done"}, states
    assert receiver.counted() == {f"turn-{turn}-ended": 1 for turn in turns}
    assert {body["turnId"] for body in receiver.deliveries} == set(turns)
    assert {body["outcome"] for body in receiver.deliveries} == {"done"}
    assert receiver.refused == []


def _until_started(http: httpx.Client, receiver: Receiver) -> list[int]:
    """Turns started after the restart (the server heals its connections first)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return _start_turns(http, receiver, TURNS_BEFORE, TURNS_AFTER)
        except (AssertionError, httpx.HTTPError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _until(check, what: str, *, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds} s for {what}")
        time.sleep(0.1)
