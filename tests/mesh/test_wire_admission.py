"""Issue 22's mesh findings, replayed: a captured signed frame re-published, a frame for one
agent published on another's channel, an old frame. Each is refused, and counted by reason."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pytest
import redis.asyncio as aioredis
from asgiref.sync import SyncToAsync, sync_to_async
from django.core.management import call_command
from django.db import connections

from mesh import refusals
from mesh.core import AgentIdentity, MeshGuard, MeshMessage, new_message_id
from mesh.core.types import IncomingMeshMessage
from mesh.layers import build_transport
from tests.mesh.support import Recorder, eventually, quiet_period

KEYS = {"planner": "secret-of-planner", "worker": "secret-of-worker", "auditor": "secret-aud"}
WORKER = AgentIdentity(id="worker", name="Worker", description="works")
AUDITOR = AgentIdentity(id="auditor", name="Auditor", description="audits")


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def signed_frame(guard: MeshGuard, *, to: str, created_at: str | None = None) -> dict:
    message = MeshMessage(
        id=new_message_id("planner"), from_="planner", to=to, content="transfer the funds"
    )
    if created_at is not None:
        message.created_at = created_at
    return guard.sign(IncomingMeshMessage.from_message(message, "direct").to_dict())


# -- the rule itself ---------------------------------------------------------------------------


def test_it_admits_a_fresh_frame_once_and_refuses_its_replays():
    guard = MeshGuard(signing_keys=KEYS)
    frame = signed_frame(guard, to="worker")
    outcomes = [guard.admit(dict(frame), "worker") for _ in range(4)]
    assert outcomes == [True, False, False, False]
    assert guard.rejected == {"replay": 3}


def test_it_refuses_a_frame_addressed_to_another_agent():
    guard = MeshGuard(signing_keys=KEYS)
    assert guard.admit(signed_frame(guard, to="worker"), "auditor") is False
    assert guard.rejected == {"wrong_recipient": 1}


def test_it_refuses_a_frame_older_or_newer_than_the_window():
    guard = MeshGuard(signing_keys=KEYS, max_age=60)
    now = datetime.now(UTC)
    old = signed_frame(guard, to="worker", created_at=_iso(now - timedelta(seconds=61)))
    future = signed_frame(guard, to="worker", created_at=_iso(now + timedelta(seconds=61)))
    garbled = signed_frame(guard, to="worker", created_at="yesterday")
    recent = signed_frame(guard, to="worker", created_at=_iso(now - timedelta(seconds=30)))
    assert [guard.admit(f, "worker") for f in (old, future, garbled, recent)] == [
        False,
        False,
        False,
        True,
    ]
    assert guard.rejected == {"stale": 3}


def test_its_memory_of_admitted_ids_is_bounded():
    clock = [1_000_000.0]
    guard = MeshGuard(signing_keys=KEYS, max_age=60, seen_capacity=100, clock=lambda: clock[0])
    for _ in range(1000):
        frame = signed_frame(
            guard, to="worker", created_at=_iso(datetime.fromtimestamp(clock[0], UTC))
        )
        assert guard.admit(frame, "worker")
    assert len(guard._seen) <= 100
    # Past the window, ids are forgotten: the timestamp refuses their frames instead.
    clock[0] += 120
    frame = signed_frame(guard, to="worker", created_at=_iso(datetime.fromtimestamp(clock[0], UTC)))
    assert guard.admit(frame, "worker")
    assert len(guard._seen) == 1


def test_the_window_is_a_setting_passed_to_every_transport(settings):
    from gloveapp.settings import mesh_for

    for kind in ("inprocess", "redis", "database"):
        assert mesh_for(kind, "", {}, 45)["default"]["CONFIG"]["max_age"] == 45
    transport = build_transport(mesh_for("inprocess", "", {}, 45)["default"])
    assert transport.guard.max_age == 45
    assert transport.guard.on_refuse is refusals.record


# -- over Redis, with a raw client as the attacker ---------------------------------------------


@pytest.fixture
async def raw(redis_url):
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    await client.flushdb()
    yield client
    await client.aclose()


@pytest.fixture
async def redis_mesh(redis_url, raw):
    from mesh.transports.redis_pubsub import RedisMeshTransport

    transport = RedisMeshTransport(url=redis_url, signing_keys=KEYS)
    unsubscribes = []

    async def listen(identity: AgentIdentity) -> Recorder:
        adapter = transport.adapter(identity.id)
        await adapter.register(identity)
        recorder = Recorder()
        unsubscribes.append(await adapter.subscribe(recorder))
        return recorder

    transport.listen = listen
    yield transport
    for unsubscribe in unsubscribes:
        await unsubscribe()
    await transport.close()


@pytest.mark.redis
async def test_a_captured_signed_frame_published_three_more_times_is_delivered_once(
    redis_mesh, raw
):
    worker = await redis_mesh.listen(WORKER)
    planner = redis_mesh.adapter("planner")
    await planner.send(
        MeshMessage(
            id=new_message_id("planner"), from_="planner", to="worker", content="transfer the funds"
        )
    )
    [delivered] = await eventually(lambda: worker.received)
    # The attacker captured the frame off the wire and publishes it again, three times.
    captured = json.dumps(
        redis_mesh.guard.sign(IncomingMeshMessage.from_message(delivered, "direct").to_dict())
    )
    assert json.loads(captured)["signature"] == delivered.signature
    for _ in range(3):
        await raw.publish("mesh:agent:worker", captured)
    await eventually(lambda: redis_mesh.guard.rejected["replay"] == 3)
    await quiet_period()
    assert [message.id for message in worker.received] == [delivered.id]


@pytest.mark.redis
async def test_a_frame_signed_for_worker_published_on_the_auditors_channel_is_refused(
    redis_mesh, raw
):
    auditor = await redis_mesh.listen(AUDITOR)
    frame = signed_frame(redis_mesh.guard, to="worker")
    await raw.publish("mesh:agent:auditor", json.dumps(frame))
    await eventually(lambda: redis_mesh.guard.rejected["wrong_recipient"] == 1)
    await quiet_period()
    assert auditor.received == []


@pytest.mark.redis
async def test_a_signed_frame_with_an_old_timestamp_is_refused(redis_mesh, raw):
    worker = await redis_mesh.listen(WORKER)
    old = _iso(datetime.now(UTC) - timedelta(hours=1))
    await raw.publish(
        "mesh:agent:worker", json.dumps(signed_frame(redis_mesh.guard, to="worker", created_at=old))
    )
    await eventually(lambda: redis_mesh.guard.rejected["stale"] == 1)
    await quiet_period()
    assert worker.received == []


# -- over the database, where the memory is a unique row per delivered id ----------------------


@pytest.fixture
def database_transport():
    from mesh.transports.database import DatabaseMeshTransport

    yield DatabaseMeshTransport(poll_interval=0.01)
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


def _deliveries(recipient: str) -> int:
    from mesh.models import MeshDelivery

    return MeshDelivery.objects.filter(recipient=recipient).count()


def _refusals() -> dict:
    refusals.flush()
    out = io.StringIO()
    call_command("mesh_refusals", "--json", stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
async def test_on_the_database_a_replayed_message_is_delivered_once_even_after_a_restart(
    database_transport,
):
    from mesh import services
    from mesh.transports.database import DatabaseMeshTransport

    await database_transport.adapter("worker").register(WORKER)
    planner = database_transport.adapter("planner")
    await planner.register(AgentIdentity(id="planner", name="Planner", description="plans"))
    message = MeshMessage(id=new_message_id("planner"), from_="planner", to="worker", content="x")
    await planner.send(message)
    captured = IncomingMeshMessage.from_message(message, "direct")
    # A restart: a new transport (nothing in memory); the frame written again three times.
    restarted = DatabaseMeshTransport(poll_interval=0.01)
    for _ in range(3):
        got = await sync_to_async(services.mesh_direct_send)(
            message=captured, wire=captured.to_dict(), max_age=restarted.guard.max_age
        )
        assert got == 0
    assert await sync_to_async(_deliveries)("worker") == 1
    assert (await sync_to_async(_refusals)())["replay"] == 3


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
async def test_on_the_database_a_message_with_an_old_timestamp_is_refused(database_transport):
    from mesh import services

    await database_transport.adapter("worker").register(WORKER)
    message = MeshMessage(
        id=new_message_id("planner"),
        from_="planner",
        to="worker",
        content="x",
        created_at=_iso(datetime.now(UTC) - timedelta(hours=1)),
    )
    old = IncomingMeshMessage.from_message(message, "direct")
    got = await sync_to_async(services.mesh_direct_send)(message=old, wire=old.to_dict())
    assert got == 0
    assert await sync_to_async(_deliveries)("worker") == 0
    assert (await sync_to_async(_refusals)())["stale"] == 1


@pytest.mark.django_db
def test_refusals_from_every_source_add_up_in_the_command_and_the_admin(admin_client):
    refusals.record("wrong_recipient")
    refusals.record("wrong_recipient")
    refusals.record("stale")
    assert _refusals() == {"stale": 1, "wrong_recipient": 2}
    page = admin_client.get("/admin/mesh/meshrefusal/")
    assert page.status_code == 200
    assert "wrong_recipient" in page.content.decode()
    out = io.StringIO()
    call_command("mesh_refusals", stdout=out)
    assert "wrong_recipient\t2" in out.getvalue()
