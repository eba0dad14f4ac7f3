"""The database transport's part of bench/mesh.py (run by it, not by `make bench`; prints JSON).

A fresh PostgreSQL database `glove_bench_mesh_<pid>` (on BENCH_PG_URL's server, default
postgres://postgres@127.0.0.1:5432/postgres) is created, migrated and dropped. SENDERS processes
each send their share of N messages to agent b, which is registered but NOT running (the
durable case); 1% of sends are retried with the same id (they must be deduplicated). Then b
"comes back": a new process reads its inbox, which must hold exactly N items, one per id.

- concurrency: each sender process runs that many agents sending at the same time (1: one
  send after another); the database adapter writes overlapping sends of a process in one
  transaction (group commit).
- msgs/s: N over the wall time of all senders (a send returns after its transaction commits,
  so "sent" is "stored").
- send->stored latency: the duration of each send call (it ends with the commit).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/postgres"


def _setup_django(database_url: str) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gloveapp.settings")
    import django

    django.setup()


async def _send(n: int, worker: int, recipient: str, concurrency: int) -> list[int]:
    from mesh.core import MeshMessage, new_message_id
    from mesh.transports.database import DatabaseMeshTransport

    transport = DatabaseMeshTransport()
    samples: list[int] = []

    async def agent(index: int, count: int) -> None:
        # `concurrency` agents of this process send at the same time (a worker running
        # many turns); each one sends its messages one after another.
        sender = f"a{worker}_{index}"
        adapter = transport.adapter(sender)
        for i in range(count):
            message_id = new_message_id(sender)
            retries = 2 if i % 100 == 0 else 1
            for _ in range(retries):
                message = MeshMessage(id=message_id, from_=sender, to=recipient, content=f"m{i}")
                started = time.perf_counter_ns()
                await adapter.send(message)
                samples.append(time.perf_counter_ns() - started)

    shares = [n // concurrency + (1 if i < n % concurrency else 0) for i in range(concurrency)]
    await asyncio.gather(*[agent(index, count) for index, count in enumerate(shares)])
    return samples


def sender_child(database_url: str, n: int, worker: int, recipient: str, concurrency: int) -> None:
    _setup_django(database_url)
    started = time.time()
    samples = asyncio.run(_send(n, worker, recipient, concurrency))
    print(json.dumps({"samples_ns": samples, "started": started, "ended": time.time()}))


def reader_child(database_url: str) -> None:
    _setup_django(database_url)
    from inbox.models import InboxItem
    from mesh.models import MeshDelivery

    items = InboxItem.objects.filter(session__id__startswith="mesh:b")
    print(
        json.dumps(
            {
                "inbox_items": items.count(),
                "distinct_messages": MeshDelivery.objects.filter(recipient__startswith="b").count(),
            }
        )
    )


def _admin(url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(sql)


def run(
    n: int, senders: int, *, distinct_recipients: bool = False, concurrency: int = 1
) -> dict[str, Any]:
    """All senders to one offline recipient "b" (its inbox serialises the writes), or each
    sender to its own recipient "b<i>" (`distinct_recipients`). Each sender process runs
    `concurrency` agents sending at the same time (their sends share transactions)."""
    recipients = [f"b{i}" if distinct_recipients else "b" for i in range(senders)]
    admin_url = os.environ.get("BENCH_PG_URL", DEFAULT_PG)
    name = f"glove_bench_mesh_{os.getpid()}"
    parts = urlsplit(admin_url)
    database_url = urlunsplit(parts._replace(path=f"/{name}"))
    _admin(admin_url, f'CREATE DATABASE "{name}"')
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "gloveapp.settings",
    }
    try:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True
        )
        register = (
            "import django; django.setup();"
            "from mesh.core import AgentIdentity; from mesh.services import mesh_agent_register;"
            f"[mesh_agent_register(identity=AgentIdentity(id=r, name=r, description='offline'))"
            f" for r in {sorted(set(recipients))!r}]"
        )
        subprocess.run([sys.executable, "-c", register], cwd=ROOT, env=env, check=True)
        share = n // senders
        children = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "send",
                    database_url,
                    str(share),
                    str(worker),
                    recipients[worker],
                    str(concurrency),
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
            )
            for worker in range(senders)
        ]
        samples: list[int] = []
        windows = []
        for child in children:
            out, _ = child.communicate()
            report = json.loads(out)
            samples += report["samples_ns"]
            windows.append((report["started"], report["ended"]))
        # The sending window (process start-up and Django set-up excluded).
        elapsed = max(end for _, end in windows) - min(start for start, _ in windows)
        reread = subprocess.run(
            [sys.executable, __file__, "read", database_url],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        if reread.returncode != 0:
            raise RuntimeError(reread.stderr)
        counts = json.loads(reread.stdout)
    finally:
        _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    ordered = sorted(samples)
    sent = share * senders

    def pct(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))] / 1e6, 3)

    return {
        "messages": sent,
        "send_calls_including_retries": len(samples),
        "sender_processes": senders,
        "agents_sending_at_once_per_process": concurrency,
        "recipients": len(set(recipients)),
        "msgs_per_s": round(sent / elapsed, 1),
        "send_to_stored_p50_ms": pct(50),
        "send_to_stored_p99_ms": pct(99),
        "recipient_offline_then_restarted": {
            "inbox_items": counts["inbox_items"],
            "deliveries": counts["distinct_messages"],
            "nothing_lost_nothing_doubled": counts["inbox_items"] == sent
            and counts["distinct_messages"] == sent,
        },
    }


if __name__ == "__main__":
    if sys.argv[1] == "send":
        sender_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6]))
    elif sys.argv[1] == "read":
        reader_child(sys.argv[2])
