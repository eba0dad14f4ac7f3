"""The server's agents from the official A2A client (`a2a-sdk`, unmodified), over both
bindings, against a real server (Daphne) and a real turn worker.

The client discovers the coffee agent by its card, sends messages (blocking and streamed),
answers the checkout's `input-required` prompt, cancels a task, resubscribes after dropping
a stream, lists and reads tasks; another user gets the refusal of a task that does not exist.
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value

from tests.api.liveserver import LiveServer
from tests.webhook_receiver import Receiver

pytestmark = [pytest.mark.apart, pytest.mark.timeout(300)]

BINDINGS = ["JSONRPC", "HTTP+JSON"]


PUSH_SECRET = "a2a-push-secret"


@pytest.fixture(scope="module")
def shop():
    # Push notifications signed, and the worker's scheduler delivering them soon.
    env = {"GLOVE_TURN_WEBHOOK_SECRET": PUSH_SECRET, "GLOVE_APPROVAL_SWEEP_SECONDS": "0.5"}
    with LiveServer(extra_env=env) as server:
        server.manage("setup_demo")
        server.start_worker()
        yield server


@pytest.fixture(scope="module")
def customer_token(shop) -> str:
    return shop.token_for("a2a-customer")


@pytest.fixture(scope="module")
def outsider_token(shop) -> str:
    return shop.token_for("a2a-outsider")


def run(coroutine):
    return asyncio.run(coroutine)


async def client_for(shop, token: str, binding: str, *, streaming: bool = True):
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    config = ClientConfig(
        httpx_client=http, supported_protocol_bindings=[binding], streaming=streaming
    )
    return await create_client(f"{shop.url}/a2a/coffee", client_config=config)


def user_message(text: str = "", *, context_id: str = "", task_id: str = "", data=None):
    parts = [Part(text=text)] if text else []
    if data is not None:
        parts.append(Part(data=ParseDict(data, Value())))
    return SendMessageRequest(
        message=Message(
            role=Role.ROLE_USER,
            message_id=uuid.uuid4().hex,
            parts=parts,
            context_id=context_id,
            task_id=task_id,
        )
    )


async def events_of(stream) -> list:
    return [event async for event in stream]


def final_task(events):
    """The task as the last event of a blocking send (one event: the task) says it."""
    [event] = events
    assert event.HasField("task"), event
    return event.task


def test_the_card_is_found_where_a2a_clients_look(shop):
    async def scenario():
        async with httpx.AsyncClient() as http:
            card = await A2ACardResolver(http, f"{shop.url}/a2a/coffee").get_agent_card()
            default = await A2ACardResolver(http, shop.url).get_agent_card()
            missing = await http.get(f"{shop.url}/a2a/nobody/.well-known/agent-card.json")
            staff_only = await http.get(f"{shop.url}/a2a/roastery/.well-known/agent-card.json")
        return card, default, missing, staff_only

    card, default, missing, staff_only = run(scenario())
    assert card.name == default.name
    bindings = {i.protocol_binding: i.url for i in card.supported_interfaces}
    assert bindings == {
        "JSONRPC": f"{shop.url}/a2a/coffee/jsonrpc",
        "HTTP+JSON": f"{shop.url}/a2a/coffee/rest",
    }
    assert {"checkout", "add_to_cart"} <= {skill.id for skill in card.skills}
    assert set(card.security_schemes) == {"apiToken", "bearer"}
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "bearer"
    assert card.capabilities.streaming
    assert missing.status_code == staff_only.status_code == 404
    assert missing.json() == staff_only.json()


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_message_gets_the_agents_reply_as_a_completed_task(shop, customer_token, binding):
    async def scenario():
        client = await client_for(shop, customer_token, binding, streaming=False)
        try:
            events = await events_of(client.send_message(user_message("Do you have Kenya AA?")))
            task = final_task(events)
            again = await client.get_task(GetTaskRequest(id=task.id))
            listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
        finally:
            await client.close()
        return task, again, listed

    task, again, listed = run(scenario())
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    [artifact] = task.artifacts
    assert "Kenya AA" in artifact.parts[0].text
    assert again.id == task.id and again.status.state == TaskState.TASK_STATE_COMPLETED
    assert [row.id for row in listed.tasks] == [task.id]


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_checkout_streams_asks_for_confirmation_and_completes_once_answered(
    shop, customer_token, binding
):
    async def scenario():
        client = await client_for(shop, customer_token, binding)
        try:
            context = f"a2a-checkout-{binding.replace('+', '-')}"
            added = await events_of(
                client.send_message(user_message("add 2 Kenya AA", context_id=context))
            )
            checkout = await events_of(
                client.send_message(
                    user_message("checkout, I'll pay at pickup", context_id=context)
                )
            )
            asking = checkout[-1]
            status = (
                asking.status_update.status
                if asking.HasField("status_update")
                else asking.task.status
            )
            task_id = asking.status_update.task_id or asking.task.id
            answered = await events_of(
                client.send_message(
                    user_message(task_id=task_id, context_id=context, data={"confirmed": True})
                )
            )
        finally:
            await client.close()
        return added, checkout, status, answered

    added, checkout, asked, answered = run(scenario())
    assert added[0].HasField("task")
    assert added[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert checkout[0].HasField("task")
    assert asked.state == TaskState.TASK_STATE_INPUT_REQUIRED
    question = MessageToDict(asked.message)
    data = next(part["data"] for part in question["parts"] if "data" in part)
    assert data["answerSchema"]["required"] == ["confirmed"]
    assert data["toolName"] == "checkout"
    assert answered[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    reply = [e.artifact_update.artifact for e in answered if e.HasField("artifact_update")]
    assert "is placed" in reply[0].parts[0].text


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_task_waiting_on_its_customer_is_cancelled(shop, customer_token, binding):
    async def scenario():
        client = await client_for(shop, customer_token, binding, streaming=False)
        try:
            context = f"a2a-cancel-{binding.replace('+', '-')}"
            await events_of(client.send_message(user_message("add 1 Kenya AA", context_id=context)))
            task = final_task(
                await events_of(
                    client.send_message(
                        user_message("checkout, I'll pay at pickup", context_id=context)
                    )
                )
            )
            cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
            with pytest.raises(Exception) as again:
                await client.cancel_task(CancelTaskRequest(id=task.id))
        finally:
            await client.close()
        return task, cancelled, again.value

    task, cancelled, again = run(scenario())
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert "cancel" in type(again).__name__.lower() or "cancel" in str(again).lower()


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_dropped_stream_is_resubscribed_and_follows_the_task(shop, customer_token, binding):
    async def scenario():
        client = await client_for(shop, customer_token, binding)
        try:
            context = f"a2a-resubscribe-{binding.replace('+', '-')}"
            await events_of(client.send_message(user_message("add 1 Colombia", context_id=context)))
            stream = client.send_message(
                user_message("checkout, I'll pay at pickup", context_id=context)
            )
            first = await anext(stream)
            await stream.aclose()  # the connection drops after the first event
            task_id = first.task.id
            resumed = await events_of(client.subscribe(SubscribeToTaskRequest(id=task_id)))
        finally:
            await client.close()
        return first, resumed

    first, resumed = run(scenario())
    assert first.HasField("task")
    assert resumed[0].HasField("task") and resumed[0].task.id == first.task.id
    last = resumed[-1]
    state = (
        last.status_update.status.state
        if last.HasField("status_update")
        else last.task.status.state
    )
    assert state == TaskState.TASK_STATE_INPUT_REQUIRED


@pytest.mark.parametrize("binding", BINDINGS)
def test_another_users_task_and_context_read_as_missing(
    shop, customer_token, outsider_token, binding
):
    async def scenario():
        client = await client_for(shop, customer_token, "JSONRPC", streaming=False)
        outsider = await client_for(shop, outsider_token, binding)
        refusals = []
        try:
            task = final_task(
                await events_of(
                    client.send_message(user_message("hello", context_id="a2a-private"))
                )
            )
            for task_id in (task.id, "999999999", "not-a-task"):
                for call in (
                    outsider.get_task(GetTaskRequest(id=task_id)),
                    outsider.cancel_task(CancelTaskRequest(id=task_id)),
                    events_of(outsider.subscribe(SubscribeToTaskRequest(id=task_id))),
                    events_of(outsider.send_message(user_message("yes", task_id=task_id))),
                    outsider.create_task_push_notification_config(
                        TaskPushNotificationConfig(task_id=task_id, url="http://127.0.0.1:9/x")
                    ),
                ):
                    try:
                        await call
                    except Exception as refused:  # the client raises its own error types
                        refusals.append((type(refused).__name__, str(refused)))
                    else:
                        refusals.append(("answered", task_id))
            listed = await outsider.list_tasks(ListTasksRequest(context_id="a2a-private"))
        finally:
            await client.close()
            await outsider.close()
        return refusals, listed

    refusals, listed = run(scenario())
    assert len(set(refusals)) == 1, refusals
    assert "TaskNotFound" in refusals[0][0] or "not found" in refusals[0][1].lower()
    assert list(listed.tasks) == []


def test_a_call_without_a_valid_token_is_a_401_naming_the_schemes(shop):
    url = f"{shop.url}/a2a/coffee/jsonrpc"
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "1"}}
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic x"}):
        refused = httpx.post(url, json=body, headers=headers)
        assert refused.status_code == 401, headers
        assert "bearer" in refused.headers["www-authenticate"].lower()
    assert httpx.get(f"{shop.url}/a2a/coffee/rest/tasks").status_code == 401


def _asks(task) -> dict:
    """The data part of what an `input-required` task asks."""
    question = MessageToDict(task.status.message)
    return next(part["data"] for part in question["parts"] if "data" in part)


async def barista_approves_the_checkout(shop, barista: str) -> None:
    """The barista (their API token `barista`) approves the open checkout over REST."""
    async with httpx.AsyncClient(
        base_url=shop.url, headers={"Authorization": f"Token {barista}"}
    ) as staff:
        queue = (await staff.get("/api/approvals/?view=all&status=open")).json()["results"]
        [approval] = [row for row in queue if row["tool"] == "checkout"]
        decided = await staff.post(
            f"/api/approvals/{approval['id']}/decide",
            json={"decision": "approve", "fingerprint": approval["fingerprint"]},
        )
        assert decided.status_code == 200, decided.text


def test_the_coffee_demos_checkout_end_to_end_over_a2a(shop, customer_token):
    """A large order paid with the saved card: the customer's permission prompt and the
    "Confirm your order" slot answered over A2A, a barista's approval decided over REST
    while the task stays `working`."""
    barista = shop.token_for("barista")

    async def until(client, task_id, wanted):
        for _ in range(600):
            task = await client.get_task(GetTaskRequest(id=task_id))
            if wanted(task):
                return task
            await asyncio.sleep(0.1)
        raise AssertionError(f"task {task_id} never got there: {task}")

    async def scenario():
        client = await client_for(shop, customer_token, "JSONRPC", streaming=False)
        seen = []
        try:
            context = "a2a-demo-checkout"
            added = final_task(
                await events_of(
                    client.send_message(user_message("add 6 Colombia", context_id=context))
                )
            )
            seen.append(added.status.state)
            task = final_task(
                await events_of(client.send_message(user_message("checkout", context_id=context)))
            )
            seen.append((task.status.state, _asks(task)["renderer"]))
            request = user_message("once", task_id=task.id, context_id=context)
            request.configuration.return_immediately = True
            await events_of(client.send_message(request))
            waiting = await until(
                client,
                task.id,
                lambda t: (
                    "staff" in MessageToDict(t.status.message).get("parts", [{}])[0].get("text", "")
                ),
            )
            seen.append(waiting.status.state)
            await barista_approves_the_checkout(shop, barista)
            confirm = await until(
                client, task.id, lambda t: t.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            )
            seen.append((confirm.status.state, _asks(confirm)["toolName"]))
            done = final_task(
                await events_of(
                    client.send_message(
                        user_message(task_id=task.id, context_id=context, data={"confirmed": True})
                    )
                )
            )
        finally:
            await client.close()
        return seen, done

    seen, done = run(scenario())
    assert seen == [
        TaskState.TASK_STATE_COMPLETED,
        (TaskState.TASK_STATE_INPUT_REQUIRED, "permission_request"),
        TaskState.TASK_STATE_WORKING,
        (TaskState.TASK_STATE_INPUT_REQUIRED, "checkout"),
    ]
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert "is placed" in done.artifacts[0].parts[0].text


def test_a_rest_start_that_waits_answers_with_the_reply(shop, customer_token):
    headers = {"Authorization": f"Token {customer_token}"}
    with httpx.Client(base_url=shop.url, headers=headers, timeout=90) as http:
        assert http.post("/api/sessions", json={"sessionId": "wait-1"}).status_code == 201
        started = http.post(
            "/api/sessions/wait-1/agent/turns?wait=30", json={"text": "Do you have Kenya AA?"}
        )
        asked = http.post(
            "/api/sessions/wait-1/agent/turns?wait=30", json={"text": "add 1 Kenya AA"}
        )
        checkout = http.post(
            "/api/sessions/wait-1/agent/turns?wait=30",
            json={"text": "checkout, I'll pay at pickup"},
        )
        listed = http.get("/api/sessions/wait-1/agent/turns").json()
    assert started.status_code == 200 and started.json()["state"] == "done"
    assert "Kenya AA" in started.json()["reply"]
    assert asked.status_code == 200
    # The checkout asks the customer to confirm: the wait ends there, the turn goes on.
    assert checkout.status_code == 200 and checkout.json()["state"] in ("running", "waiting")
    assert [row["turnId"] for row in listed] == [
        checkout.json()["turnId"],
        asked.json()["turnId"],
        started.json()["turnId"],
    ]


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_push_notification_tells_the_clients_url_when_the_task_ends(
    shop, customer_token, binding
):
    receiver = Receiver(PUSH_SECRET)

    async def scenario():
        client = await client_for(shop, customer_token, binding, streaming=False)
        try:
            request = user_message("Do you have Kenya AA?")
            request.configuration.return_immediately = True
            request.configuration.task_push_notification_config.CopyFrom(
                TaskPushNotificationConfig(url=receiver.url, token="client-token-1")
            )
            pushed = final_task(await events_of(client.send_message(request)))
            later = user_message("add 1 Kenya AA", context_id=pushed.context_id)
            later.configuration.return_immediately = True
            second = final_task(await events_of(client.send_message(later)))
            made = await client.create_task_push_notification_config(
                TaskPushNotificationConfig(
                    task_id=second.id, id="mine", url=receiver.url, token="client-token-2"
                )
            )
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=second.id)
            )
            for _ in range(600):
                if len(receiver.counted()) >= 2:
                    break
                await asyncio.sleep(0.1)
        finally:
            await client.close()
        return pushed, second, made, listed

    try:
        pushed, second, made, listed = run(scenario())
    finally:
        receiver.close()
    assert made.id == "mine" and made.task_id == second.id
    assert [config.id for config in listed.configs] == ["mine"]
    by_task = {body["task"]["id"]: body for body in receiver.deliveries}
    assert set(by_task) == {pushed.id, second.id}
    assert {body["task"]["status"]["state"] for body in by_task.values()} == {
        "TASK_STATE_COMPLETED"
    }
    tokens = {h["X-A2A-Notification-Token"] for h, _ in receiver.requests}
    assert tokens == {"client-token-1", "client-token-2"}
    assert all(count == 1 for count in receiver.counted().values())


METHODS = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
]
JUNK = [None, "", "\x00", "\ud800", "9" * 40, "-1", -1, 10**20, 1.5, True, [], {}, "x" * 30_000]


def hostile_params(rng) -> list:
    """Params of every shape a careless or hostile client sends."""
    shapes: list = [None, [], "text", 7, {}, {"id": None}]
    for junk in JUNK:
        shapes += [
            {"id": junk, "historyLength": junk},
            {"taskId": junk, "id": junk, "url": junk, "token": junk},
            {"contextId": junk, "status": junk, "pageSize": junk, "pageToken": junk},
            {
                "message": {
                    "messageId": junk,
                    "role": rng.choice(["ROLE_USER", "ROLE_AGENT", junk]),
                    "contextId": junk,
                    "taskId": junk,
                    "parts": [{"text": junk}, {"data": junk}, {"url": junk}],
                    "metadata": {"slotId": junk},
                },
                "configuration": {"returnImmediately": True, "historyLength": junk},
            },
            {"message": {"messageId": "m", "parts": junk}},
        ]
    return shapes


def test_a_fuzz_of_every_json_rpc_method_gets_no_server_error(shop, customer_token):
    rng = random.Random(44)
    url = f"{shop.url}/a2a/coffee/jsonrpc"
    headers = {"Authorization": f"Token {customer_token}", "A2A-Version": "1.0"}
    answers = []
    with httpx.Client(headers=headers, timeout=90) as http:
        for method in METHODS:
            for params in hostile_params(rng):
                body = {"jsonrpc": "2.0", "id": rng.randint(1, 10**6), "method": method}
                if params is not None:
                    body["params"] = params
                # json.dumps escapes a lone surrogate, as a hostile client would send it.
                response = http.post(
                    url, content=json.dumps(body), headers={"Content-Type": "application/json"}
                )
                answers.append((method, params, response.status_code, response.text))
        for raw in (b"", b"{", b"\xff\xfe", b"[" * 10_000, b'{"jsonrpc": "2.0"}', b"[]", b"null"):
            response = http.post(url, content=raw, headers={"Content-Type": "application/json"})
            answers.append(("raw", raw[:20], response.status_code, response.text))
        rest = f"{shop.url}/a2a/coffee/rest"
        for path in ("/tasks/%00", "/tasks/" + "9" * 40, "/tasks/x:cancel", "/tasks?pageSize=-1"):
            response = http.get(rest + path)
            answers.append(("rest", path, response.status_code, response.text))
        for raw in (b"{", b"[" * 10_000, b'{"message": {"parts": 5}}', b'{"message": null}'):
            response = http.post(rest + "/message:send", content=raw)
            answers.append(("rest", raw[:20], response.status_code, response.text))
    failures = [
        (method, params, status)
        for method, params, status, text in answers
        if status >= 500 or "-32603" in text or "Internal" in text
    ]
    assert failures == [], failures[:5]


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_message_sent_again_without_a_context_starts_one_task(shop, customer_token, binding):
    # A client that lost the answer sends the same message (same messageId) again; naming no
    # context, it must not start a second conversation, nor a second turn.
    async def scenario():
        client = await client_for(shop, customer_token, binding, streaming=False)
        request = user_message("Do you have Kenya AA?")
        try:
            first = final_task(await events_of(client.send_message(request)))
            again = final_task(await events_of(client.send_message(request)))
            listed = await client.list_tasks(ListTasksRequest(context_id=first.context_id))
        finally:
            await client.close()
        return first, again, listed

    first, again, listed = run(scenario())
    assert again.id == first.id and again.context_id == first.context_id
    assert [row.id for row in listed.tasks] == [first.id]
