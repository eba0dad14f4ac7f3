"""The reply's words over A2A as the model writes them, from the official `a2a-sdk` client
(unmodified), against a real server and worker that share Redis (the channel layer that
carries a turn's words from its worker to the server's streams).

Each stream's events, folded by the SDK's own rule (`append_artifact_to_task`, which refuses
an `append` to an artifact the client does not hold), give the task `GetTask` reads, also
after a dropped stream is resubscribed.
"""

from __future__ import annotations

import asyncio
import socket
from urllib.parse import urlsplit

import pytest
from a2a.server.tasks.task_manager import append_artifact_to_task
from a2a.types import (
    GetTaskRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from tests.api.liveserver import LiveServer
from tests.api.test_a2a import (
    BINDINGS,
    _asks,
    barista_approves_the_checkout,
    client_for,
    events_of,
    final_task,
    run,
    user_message,
)
from tests.conftest import REDIS_URL, service_missing
from tests.webhook_receiver import Receiver

pytestmark = [pytest.mark.apart, pytest.mark.timeout(300)]

PUSH_SECRET = "a2a-stream-push-secret"


@pytest.fixture(scope="module")
def talking_shop():
    where = urlsplit(REDIS_URL)
    try:
        socket.create_connection((where.hostname or "127.0.0.1", where.port or 6379), 1).close()
    except OSError:
        service_missing(f"Redis is not reachable at {REDIS_URL}")
    env = {
        "REDIS_URL": REDIS_URL,
        # Push notifications signed, and the worker's scheduler delivering them soon.
        "GLOVE_TURN_WEBHOOK_SECRET": PUSH_SECRET,
        "GLOVE_APPROVAL_SWEEP_SECONDS": "0.5",
    }
    with LiveServer(extra_env=env) as server:
        server.manage("setup_demo")
        server.start_worker()
        yield server


@pytest.fixture(scope="module")
def customer_token(talking_shop) -> str:
    return talking_shop.token_for("a2a-stream-customer")


def folded(events) -> Task:
    """The task a client holds after reading one stream, by the SDK's rules."""
    task = Task()
    task.CopyFrom(events[0].task)
    for event in events[1:]:
        if event.HasField("artifact_update"):
            append_artifact_to_task(task, event.artifact_update)
        elif event.HasField("status_update"):
            task.status.CopyFrom(event.status_update.status)
    return task


def text_of(artifact) -> str:
    return "".join(part.text for part in artifact.parts)


def state_of(event):
    if event.HasField("status_update"):
        return event.status_update.status.state
    return event.task.status.state if event.HasField("task") else None


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_streamed_reply_arrives_in_chunks_before_the_task_completes(
    talking_shop, customer_token, binding
):
    async def scenario():
        client = await client_for(talking_shop, customer_token, binding)
        try:
            events = await events_of(
                client.send_message(user_message("What coffees do you have? Tell me about them."))
            )
            stored = await client.get_task(GetTaskRequest(id=events[0].task.id))
        finally:
            await client.close()
        return events, stored

    events, stored = run(scenario())
    kinds = ["chunk" if event.HasField("artifact_update") else state_of(event) for event in events]
    chunks = [event.artifact_update for event in events if event.HasField("artifact_update")]
    assert kinds[-1] == TaskState.TASK_STATE_COMPLETED
    assert kinds[-2] == "chunk" and "chunk" not in kinds[:1]
    # Words came before the end (the first chunk starts the artifact), the last closes it.
    assert len(chunks) >= 2, kinds
    assert not chunks[0].append
    assert [chunk.last_chunk for chunk in chunks] == [False] * (len(chunks) - 1) + [True]
    assert {chunk.artifact.artifact_id for chunk in chunks} == {stored.artifacts[0].artifact_id}
    held = folded(events)
    assert held.status.state == TaskState.TASK_STATE_COMPLETED
    [artifact] = held.artifacts
    assert text_of(artifact) == text_of(stored.artifacts[0]) != ""


def test_a_dropped_stream_resubscribed_folds_to_the_stored_task(talking_shop, customer_token):
    """A large order: the permission prompt answered on a stream dropped while the task
    waits on a barista; the barista approves; the resubscribed stream follows the task to
    its confirmation, whose answer streams the reply."""
    barista = talking_shop.token_for("barista")

    async def scenario():
        client = await client_for(talking_shop, customer_token, "JSONRPC")
        streams = []
        try:
            context = "a2a-stream-resubscribe"
            streams.append(
                await events_of(
                    client.send_message(user_message("add 6 Colombia", context_id=context))
                )
            )
            streams.append(
                await events_of(client.send_message(user_message("checkout", context_id=context)))
            )
            task_id = streams[-1][0].task.id
            answering = client.send_message(
                user_message("once", task_id=task_id, context_id=context)
            )
            dropped = []
            async for event in answering:
                dropped.append(event)
                message = (
                    event.status_update.status.message
                    if event.HasField("status_update")
                    else event.task.status.message
                )
                if "staff" in str(MessageToDict(message)):
                    break
            await answering.aclose()  # the connection drops while the task waits on staff
            streams.append(dropped)
            await barista_approves_the_checkout(talking_shop, barista)
            streams.append(await events_of(client.subscribe(SubscribeToTaskRequest(id=task_id))))
            streams.append(
                await events_of(
                    client.send_message(
                        user_message(task_id=task_id, context_id=context, data={"confirmed": True})
                    )
                )
            )
            stored = await client.get_task(GetTaskRequest(id=task_id))
        finally:
            await client.close()
        return streams, stored

    streams, stored = run(scenario())
    added, checkout, dropped, resumed, confirmed = (folded(events) for events in streams)
    assert added.status.state == TaskState.TASK_STATE_COMPLETED
    assert checkout.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert dropped.status.state == TaskState.TASK_STATE_WORKING
    assert resumed.id == stored.id
    assert resumed.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert confirmed.status.state == stored.status.state == TaskState.TASK_STATE_COMPLETED
    [artifact] = confirmed.artifacts
    assert text_of(artifact) == text_of(stored.artifacts[0])
    assert "is placed" in text_of(artifact)


async def _received(receiver: Receiver, count: int) -> None:
    for _ in range(600):
        if len(receiver.counted()) >= count:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{count} pushes never came: {receiver.deliveries}")


def test_a_task_pushes_when_it_asks_its_caller_and_when_it_ends(talking_shop, customer_token):
    """A client that does not hold a stream open: told that the checkout asks it (the
    receiver refuses the first try, so that push is sent again), answers, is told the end;
    each change counted once."""
    receiver = Receiver(PUSH_SECRET, failures=1)

    async def scenario():
        client = await client_for(talking_shop, customer_token, "HTTP+JSON", streaming=False)
        try:
            context = "a2a-stream-pushes"
            await events_of(client.send_message(user_message("add 1 Kenya AA", context_id=context)))
            request = user_message("checkout, I'll pay at pickup", context_id=context)
            request.configuration.return_immediately = True
            request.configuration.task_push_notification_config.CopyFrom(
                TaskPushNotificationConfig(url=receiver.url, token="push-token")
            )
            task = final_task(await events_of(client.send_message(request)))
            await _received(receiver, 1)
            asking = await client.get_task(GetTaskRequest(id=task.id))
            done = final_task(
                await events_of(
                    client.send_message(
                        user_message(task_id=task.id, context_id=context, data={"confirmed": True})
                    )
                )
            )
            await _received(receiver, 2)
        finally:
            await client.close()
        return task, asking, done

    try:
        task, asking, done = run(scenario())
    finally:
        receiver.close()
    asked, ended = receiver.deliveries
    assert asked["task"]["id"] == ended["task"]["id"] == task.id
    assert asked["task"]["contextId"] == task.context_id
    assert asked["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert asked["task"]["metadata"]["slotId"] == _asks(asking)["slotId"]
    assert ended["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert receiver.counted() == {
        asked["task"]["metadata"]["deliveryId"]: 1,
        f"turn-{task.id}-ended": 1,
    }
    # Three tries in all: the refused one and the two taken, each signed anew.
    assert len(receiver.requests) == 3 and receiver.refused == []
    events = [headers["X-Glove-Event"] for headers, _ in receiver.requests]
    assert events == ["task.input_required", "task.input_required", "turn.ended"]
    assert {headers["X-A2A-Notification-Token"] for headers, _ in receiver.requests} == {
        "push-token"
    }
