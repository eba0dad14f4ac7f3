"""The turn path's writes on PostgreSQL: rows, WAL bytes and HOT updates per turn (issue 30).

Each tree (this one, and with `--before PATH` a worktree of `main`, the "before" of the same
run) gets a fresh database on a PostgreSQL cluster this bench starts for itself
(tests/servers.py: no other client writes WAL there, so `pg_current_wal_lsn()` deltas are
this bench's own; autovacuum off; durability off, so WAL is the records without full-page
images). In a child process importing that tree's code:

- turns: an in-process turn worker (the engine and database-queue fetcher `turn_worker`
  runs) answers T messages over 20 sessions with a scripted model that answers at once;
  per turn: rows inserted / updated / deleted in all tables, updates of the turns and the
  task-result tables with their HOT share (`pg_stat_user_tables`), WAL bytes;
- heartbeats: 20 running turns renewed 50 times (`turns_heartbeat`, what a worker does every
  lease/3 for each running turn): the HOT share of those updates and WAL bytes per renewal.

Statistics are read after every connection of the phase closed (a backend flushes its
counters when it exits). The turns table's indexes are listed with their count.

    .venv/bin/python bench/turn_writes.py [--turns 200] [--before /tmp/glove-main]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

SESSIONS = 20
HEARTBEAT_ROUNDS = 50


class FastModel:
    name = "bench-fast"

    def set_system_prompt(self, text: str) -> None:
        pass

    async def prompt(self, messages, tools, notify, abort=None):  # type: ignore[no-untyped-def]
        from gloveapp.core.types import Message, ModelResult

        return ModelResult(messages=[Message(sender="agent", text="ok")], tokens_in=1, tokens_out=1)


def snapshot(cursor: Any) -> dict[str, Any]:
    cursor.execute("SELECT pg_stat_clear_snapshot()")
    cursor.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
    wal = int(cursor.fetchone()[0])
    # A day partition's counts are its log's (gloveapp/lib/db/partitions.py): summed by parent.
    cursor.execute(
        "SELECT COALESCE(p.relname, s.relname), SUM(n_tup_ins)::bigint, "
        "SUM(n_tup_upd)::bigint, SUM(n_tup_hot_upd)::bigint, SUM(n_tup_del)::bigint "
        "FROM pg_stat_user_tables s LEFT JOIN pg_inherits i ON i.inhrelid = s.relid "
        "LEFT JOIN pg_class p ON p.oid = i.inhparent GROUP BY 1"
    )
    tables = {row[0]: row[1:] for row in cursor.fetchall()}
    return {"wal": wal, "tables": tables}


def delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    tables = {}
    for name, values in after["tables"].items():
        old = before["tables"].get(name, (0, 0, 0, 0))
        tables[name] = [new - was for new, was in zip(values, old, strict=True)]
    return {"wal": after["wal"] - before["wal"], "tables": tables}


def child(turns: int) -> dict[str, Any]:
    sys.path.insert(0, os.getcwd())
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gloveapp.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection, connections

    import gloveapp
    from gloveapp.core.providers.registry import register_model_provider

    call_command("migrate", verbosity=0)
    register_model_provider("bench-fast", lambda model="", **kwargs: FastModel(), replace=True)
    settings.GLOVE_MODEL = "bench-fast"
    settings.GLOVE_TURNS_PER_USER_PER_MINUTE = 10**6
    settings.GLOVE_RETENTION_SECONDS = 0  # no retention round in the middle (after only)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'turns_turn' "
            "ORDER BY indexname"
        )
        indexes = [row[0] for row in cursor.fetchall()]
    result = asyncio.run(measure(turns))
    result["turn_indexes"] = indexes
    result["tree"] = str(Path(gloveapp.__file__).resolve().parents[1])
    connections.close_all()
    return result


async def measure(turns: int) -> dict[str, Any]:
    from asgiref.sync import sync_to_async
    from django.contrib.auth import get_user_model
    from django.db import connections

    from gloveapp.conversations.services import session_create
    from gloveapp.turns import claim, leases, submit
    from gloveapp.turns.engine import TurnEngine
    from gloveapp.turns.models import Turn
    from gloveapp.turns.public import submit_message
    from gloveapp.turns.queue.fetch import fetcher_for_backend
    from gloveapp.turns.queue.tasks import enqueue_session

    user = await sync_to_async(get_user_model().objects.create_user)("bench")
    sessions = [
        (await sync_to_async(session_create)(owner=user, agent_name="coffee", title=f"b{n}")).pk
        for n in range(SESSIONS)
    ]

    def unfinished() -> bool:
        return Turn.objects.filter(status__in=["queued", "running"]).exists()

    async def close_everything() -> None:
        await sync_to_async(connections.close_all)()
        connections.close_all()
        await asyncio.sleep(0.5)  # the backends' exit flushes their statistics

    def read() -> dict[str, Any]:
        with connections["default"].cursor() as cursor:
            return snapshot(cursor)

    async def run_turns(count: int) -> None:
        engine = TurnEngine(requeue=enqueue_session, worker_id="bench")
        serving = asyncio.ensure_future(engine.serve(fetch=fetcher_for_backend()))
        for index in range(count):
            await submit_message(
                session_id=sessions[index % SESSIONS], text=f"m{index}", user_id=user.pk
            )
            if index % SESSIONS == SESSIONS - 1:
                while await sync_to_async(unfinished)():  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
        while await sync_to_async(unfinished)():  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        await engine.stop(grace=5)
        serving.cancel()
        try:
            await serving
        except asyncio.CancelledError:
            pass

    await run_turns(SESSIONS)  # warm-up
    await close_everything()
    start = await sync_to_async(read)()
    await close_everything()
    began = time.perf_counter()
    await run_turns(turns)
    elapsed = time.perf_counter() - began
    await close_everything()
    end = await sync_to_async(read)()
    await close_everything()
    turn_delta = delta(start, end)

    # Heartbeats: SESSIONS running turns, renewed HEARTBEAT_ROUNDS times.
    def claim_running() -> list[int]:
        for index, session_id in enumerate(sessions):
            submit.turn_submit(
                session_id=session_id, text=f"hb{index}", user_id=user.pk, source="page"
            )
        ids = []
        for session_id in sessions:
            turn = claim.turn_claim_next(session_id=session_id, worker_id="bench-hb")
            ids.append(turn.pk)
        return ids

    ids = await sync_to_async(claim_running)()
    await close_everything()
    start = await sync_to_async(read)()
    await close_everything()

    def beat() -> None:
        for _ in range(HEARTBEAT_ROUNDS):
            leases.turns_heartbeat(turn_ids=ids, worker_id="bench-hb")

    await sync_to_async(beat)()
    await close_everything()
    end = await sync_to_async(read)()
    await close_everything()
    beat_delta = delta(start, end)

    def per_turn(value: float) -> float:
        return round(value / turns, 2)

    totals = [sum(values[i] for values in turn_delta["tables"].values()) for i in range(4)]
    turn_table = turn_delta["tables"].get("turns_turn", [0, 0, 0, 0])
    tasks = turn_delta["tables"].get("django_tasks_database_dbtaskresult", [0, 0, 0, 0])
    beats = beat_delta["tables"].get("turns_turn", [0, 0, 0, 0])
    renewals = HEARTBEAT_ROUNDS * SESSIONS
    return {
        "turns": turns,
        "turns_per_second": round(turns / elapsed, 1),
        "per_turn": {
            "rows_inserted": per_turn(totals[0]),
            "rows_updated": per_turn(totals[1]),
            "rows_deleted": per_turn(totals[3]),
            "hot_share_all_updates": round(totals[2] / totals[1], 3) if totals[1] else None,
            "wal_bytes": per_turn(turn_delta["wal"]),
            "turn_row_updates": per_turn(turn_table[1]),
            "turn_row_hot_share": round(turn_table[2] / turn_table[1], 3)
            if turn_table[1]
            else None,
            "task_result_updates": per_turn(tasks[1]),
            "task_result_hot_share": round(tasks[2] / tasks[1], 3) if tasks[1] else None,
        },
        "heartbeats": {
            "renewals": renewals,
            "turn_row_updates": beats[1],
            "hot_share": round(beats[2] / beats[1], 3) if beats[1] else None,
            "wal_bytes_per_renewal": round(beat_delta["wal"] / renewals, 1),
        },
    }


def run_tree(tree: Path, url: str, turns: int) -> dict[str, Any]:
    env = dict(os.environ, DATABASE_URL=url, PYTHONPATH=str(tree), DJANGO_SETTINGS_MODULE="")
    env.pop("DJANGO_SETTINGS_MODULE")
    env.pop("REDIS_URL", None)
    env["GLOVE_TASKS_BACKEND"] = "db"
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", "--turns", str(turns)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the bench child in {tree} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--before", type=Path, help="a worktree of main: the 'before' tree")
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.turns)))
        return
    sys.path.insert(0, str(ROOT))
    from tests.servers import PostgresServer

    trees = {"after": ROOT}
    if args.before:
        trees = {"before": args.before.resolve(), **trees}
    results: dict[str, Any] = {}
    with PostgresServer() as pg:
        pg.execute("ALTER SYSTEM SET autovacuum = off")
        pg.execute("SELECT pg_reload_conf()")
        for label, tree in trees.items():
            database = f"bench_{label}"
            pg.execute(f'CREATE DATABASE "{database}"')
            results[label] = run_tree(tree, pg.url(database), args.turns)
    print(
        json.dumps(
            {
                "bench": "turn_writes",
                "method": "private PostgreSQL cluster; pg_stat_user_tables and "
                "pg_current_wal_lsn() deltas around the phase, connections closed first",
                **results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
