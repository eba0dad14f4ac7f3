"""An A2A agent built with a2a-sdk's own server, for the mesh's A2A tests (run in a process).

    python -m tests.mesh.a2a_agent PORT

It answers deterministically, by what the message says:
- "need input ...": asks "Which size?" (input-required); the answer on the task completes it;
- "fail ...": fails the task; "auth ...": asks for authentication (auth-required);
- "ask glove: QUESTION": asks the Glove server's coffee agent over A2A (a2a-sdk's client,
  GLOVE_URL and GLOVE_TOKEN from the environment) and answers with its reply;
- anything else: `X heard "TEXT" (message N of context CONTEXT)`, N counting per context.

Every request but the card needs `Authorization: Bearer $X_TOKEN`: a 401 otherwise.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections import Counter

import httpx
import uvicorn
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_artifact_text, get_message_text, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    Message,
    Part,
    Role,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette
from starlette.responses import JSONResponse

CARD_PATH = "/.well-known/agent-card.json"


async def ask_glove(question: str) -> str:
    """Our coffee agent's answer, through the official client with the token we were given."""
    token = os.environ.get("GLOVE_TOKEN", "")
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    try:
        client = await create_client(
            f"{os.environ['GLOVE_URL']}/a2a/coffee",
            client_config=ClientConfig(httpx_client=http, streaming=False),
        )
        request = SendMessageRequest(
            message=Message(
                role=Role.ROLE_USER,
                message_id=uuid.uuid4().hex,
                context_id="asked-by-x",
                parts=[Part(text=question)],
            )
        )
        async for event in client.send_message(request):
            task = event.task
            if task.artifacts:
                return get_artifact_text(task.artifacts[0])
            return get_message_text(task.status.message)
        return "(no answer)"
    finally:
        await http.aclose()


class Executor(AgentExecutor):
    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        task = context.current_task
        if task is None:
            task = Task(
                id=context.task_id,
                context_id=context.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
            )
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)

        def say(words: str) -> Message:
            return updater.new_agent_message([new_text_part(words)])

        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.complete(say(f"X got the answer: {text}"))
            return
        self.seen[task.context_id] += 1
        if text.startswith("need input"):
            await updater.requires_input(say("Which size?"))
        elif text.startswith("fail"):
            await updater.failed(say("X cannot do that."))
        elif text.startswith("auth"):
            await updater.requires_auth(say("Sign in to X first."))
        elif text.startswith("ask glove:"):
            try:
                answer = await ask_glove(text.removeprefix("ask glove:").strip())
            except Exception as error:
                await updater.failed(say(f"Glove did not answer: {error}"))
                return
            await updater.add_artifact([new_text_part(f"Glove says: {answer}")], name="reply")
            await updater.complete()
        else:
            count = self.seen[task.context_id]
            await updater.add_artifact(
                [new_text_part(f'X heard "{text}" (message {count} of context {task.context_id})')],
                name="reply",
            )
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def card(url: str) -> AgentCard:
    return AgentCard(
        name="Agent X",
        description="An A2A agent of another team.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=f"{url}/jsonrpc", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(id="echo", name="Echo", description="Says what it heard.", tags=["echo"]),
            AgentSkill(id="sizes", name="Sizes", description="Asks for a size.", tags=["sizes"]),
        ],
        security_schemes={
            "bearer": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer")
            )
        },
        security_requirements=[SecurityRequirement(schemes={"bearer": StringList()})],
    )


def app(url: str) -> Starlette:
    agent_card = card(url)
    handler = DefaultRequestHandler(
        agent_executor=Executor(), task_store=InMemoryTaskStore(), agent_card=agent_card
    )
    expected = f"Bearer {os.environ.get('X_TOKEN', '')}"
    routes = [
        *create_agent_card_routes(agent_card),
        *create_jsonrpc_routes(handler, rpc_url="/jsonrpc"),
        *create_rest_routes(handler, path_prefix="/rest"),
    ]
    inner = Starlette(routes=routes)

    async def checked(scope, receive, send):
        if scope["type"] == "http" and scope["path"] != CARD_PATH:
            headers = dict(scope["headers"])
            if headers.get(b"authorization", b"").decode() != expected:
                response = JSONResponse({"error": "unauthorized"}, status_code=401)
                await response(scope, receive, send)
                return
        await inner(scope, receive, send)

    return checked


if __name__ == "__main__":
    port = int(sys.argv[1])
    uvicorn.run(app(f"http://127.0.0.1:{port}"), host="127.0.0.1", port=port, log_level="warning")
