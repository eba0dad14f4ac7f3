"""Replay: 1,000 recorded conversations run again against an agent version (issue 43).

A database of its own (created on the server of `--database-url`, migrated, dropped after)
holds 1,000 conversations of the scripted shop agent (tests/fakes/replay_model.py), one to
two customer messages each, a third of them with a `check_stock` call, recorded as its turns
store them. `replay_agent` (`runs.replay_run_execute`, in this process, a batch of 50 at a
time) then replays all of them twice:

- `same version`: against a version whose prompt is the code's: every tool call and reply
  must be identical (diverged 0);
- `changed prompt`: against a version whose prompt answers "refund" differently: exactly
  the conversations that mention a refund must diverge, no other;
- `sandbox`: against a version whose stock questions call `reserve` (a tool that writes a
  row; no recording has the call), with `--unseen-tools run-sandbox`: each conversation in a
  transaction rolled back, the tool run for real (the 600 stock conversations diverge);
- `floor`: reading the 1,000 recordings alone (`recordings_of`, a batch of 50 at a time: four queries each), the part
  of a replay that is the database's.

Goal (issue 43): the 1,000 replayed in under 60 s on this machine. Prints JSON.

    .venv/bin/python bench/replay.py [--database-url postgres://postgres@127.0.0.1:5432/x]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.machine import machine  # noqa: E402
from bench.lib.report import goal  # noqa: E402

CONVERSATIONS = 1_000
GOAL_SECONDS = 60.0
TEXTS = [
    ["hello", "is there stock of colombia?"],
    ["do you have stock of kenya?", "thanks"],
    ["I want a refund", "ok"],
    ["what is in stock of brazil?"],
    ["good morning"],
]


def setup(database_url: str) -> tuple[str, str]:
    base, _, _ = database_url.rpartition("/")
    name = f"glove_bench_replay_{secrets.token_hex(4)}"
    admin = f"{base}/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = f"{base}/{name}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gloveapp.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)
    from tests.fakes import replay_model

    replay_model.register()
    settings.GLOVE_AGENTS = {
        **settings.GLOVE_AGENTS,
        "shop": {"factory": "tests.fakes.replay_model.shop_agent", "model": "replay-test"},
    }
    return name, admin


def record() -> list[str]:
    from django.contrib.auth import get_user_model

    from gloveapp.conversations.services import session_create
    from tests.fakes import replay_model

    owner = get_user_model().objects.create_user("carla")
    ids = []
    for index in range(CONVERSATIONS):
        session = session_create(owner=owner, agent_name="shop", session_id=f"chat-{index}")
        replay_model.record(session.pk, TEXTS[index % len(TEXTS)])
        ids.append(session.pk)
    return ids


def replay(ids: list[str], prompt: str, unseen_tools: str = "mark") -> tuple[float, int, set[str]]:
    from gloveapp.versions.models import ReplayResult
    from gloveapp.versions.runs import replay_run_create, replay_run_execute
    from gloveapp.versions.services import version_draft

    version = version_draft(agent_name="shop", system_prompt=prompt)
    run = replay_run_create(
        version=version, session_ids=ids, selection="bench", unseen_tools=unseen_tools
    )
    started = time.perf_counter()
    run = replay_run_execute(run.pk)
    took = time.perf_counter() - started
    diverged = set(
        ReplayResult.objects.filter(run=run, diverged=True).values_list("session_id", flat=True)
    )
    assert run.done == len(ids), run.done
    return took, run.diverged, diverged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/glove_replay_bench"
    )
    args = parser.parse_args()
    name, admin = setup(args.database_url)
    try:
        from django.db import connections

        from gloveapp.versions.recording import recordings_of
        from gloveapp.versions.runs import BATCH
        from tests.fakes import replay_model

        started = time.perf_counter()
        ids = record()
        recorded_in = time.perf_counter() - started
        started = time.perf_counter()
        for first in range(0, len(ids), BATCH):
            recordings_of(ids[first : first + BATCH])
        floor = time.perf_counter() - started
        same, same_count, _ = replay(ids, replay_model.PROMPT)
        changed_prompt = replay_model.PROMPT + '\nwhen "refund" reply "Refunds take 5 days."'
        changed, _, diverged = replay(ids, changed_prompt)
        # Every stock question now a call no recording has, run for real in the sandbox.
        sandboxed, sandbox_count, _ = replay(
            ids, replay_model.PROMPT + "\n" + replay_model.RESERVE, "run-sandbox"
        )
        expected = {
            session_id
            for index, session_id in enumerate(ids)
            if any("refund" in text for text in TEXTS[index % len(TEXTS)])
        }
        rows = [
            {
                "measure": "same version",
                "conversations": len(ids),
                "seconds": round(same, 2),
                "per_conversation_ms": round(same / len(ids) * 1000, 2),
                "diverged": same_count,
            },
            {
                "measure": "changed prompt",
                "conversations": len(ids),
                "seconds": round(changed, 2),
                "per_conversation_ms": round(changed / len(ids) * 1000, 2),
                "diverged": len(diverged),
                "expected_diverged": len(expected),
                "exactly_those": diverged == expected,
            },
            {
                "measure": "sandbox: calls never recorded run, rolled back",
                "conversations": len(ids),
                "seconds": round(sandboxed, 2),
                "per_conversation_ms": round(sandboxed / len(ids) * 1000, 2),
                "diverged": sandbox_count,
            },
            {
                "measure": "floor: reading the recordings",
                "conversations": len(ids),
                "seconds": round(floor, 2),
            },
        ]
        met = same < GOAL_SECONDS and same_count == 0 and diverged == expected
        print(
            json.dumps(
                {
                    "benchmark": "replay",
                    "machine": machine(),
                    "recorded_in_seconds": round(recorded_in, 1),
                    "measures": rows,
                    "goals": [
                        goal(
                            43,
                            "1,000 recorded conversations replayed in < 60 s; same version "
                            "100 % identical, a changed prompt diverges exactly where it should",
                            f"{same:.1f} s, {same_count} diverged; changed prompt: "
                            f"{len(diverged)} of {len(expected)} expected",
                            met,
                        )
                    ],
                },
                indent=2,
            )
        )
        connections.close_all()
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
