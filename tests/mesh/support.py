"""Builders shared by the mesh tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from gloveapp.core import CompactionConfig, Glove, MemoryStore, ScriptedModel, ToolResultData
from gloveapp.core.tools import ToolContext
from mesh.core import AgentIdentity, IncomingMeshMessage

A = AgentIdentity(id="a", name="Agent A", description="first")
B = AgentIdentity(id="b", name="Agent B", description="second", capabilities=["chat"])
C = AgentIdentity(id="c", name="Gamma", description="third", capabilities=["research"])


async def eventually(check: Callable[[], Any], *, timeout: float = 5.0) -> Any:  # noqa: ASYNC109
    """Wait until `check()` (sync or async) is truthy; fail with its last value otherwise."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition still false after {timeout}s: {value!r}")
        await asyncio.sleep(0.005)


async def quiet_period() -> None:
    """Let in-flight deliveries land before asserting that something did NOT arrive."""
    await asyncio.sleep(0.15)


def make_agent(
    agent_id: str, script: list[Any] | None = None, *, store: Any = None
) -> tuple[Glove, ScriptedModel, Any]:
    store = store if store is not None else MemoryStore(agent_id)
    model = ScriptedModel(script or [], label=agent_id)
    glove = Glove(
        store=store,
        model=model,
        system_prompt=f"you are agent {agent_id}",
        compaction_config=CompactionConfig("summarise", max_turns=50),
    )
    return glove.build(), model, store


def mesh_tool_names(glove: Glove) -> list[str]:
    return [tool.name for tool in glove.tools if tool.name.startswith("glove_mesh_")]


async def call_tool(glove: Glove, name: str, args: dict[str, Any]) -> ToolResultData:
    """Run one folded tool the way the executor does (validated input, the agent's store)."""
    [tool] = [t for t in glove.tools if t.name == name]
    validated = tool.input_model.model_validate(args)
    return await tool.run(validated, ToolContext(name, None, None, glove.store))


class Recorder:
    """A handler that keeps what it receives."""

    def __init__(self) -> None:
        self.received: list[IncomingMeshMessage] = []

    async def __call__(self, message: IncomingMeshMessage) -> None:
        self.received.append(message)


async def items(store: Any, **where: Any) -> list[Any]:
    return [
        item
        for item in await store.get_inbox_items()
        if all(getattr(item, key) == value for key, value in where.items())
    ]


class Proxy:
    """An adapter with some methods replaced, to make a transport fail on purpose."""

    def __init__(self, inner: Any, **overrides: Callable[..., Any]) -> None:
        self._inner = inner
        self._overrides = overrides

    def __getattr__(self, name: str) -> Any:
        if name in self._overrides:
            return self._overrides[name]
        return getattr(self._inner, name)
