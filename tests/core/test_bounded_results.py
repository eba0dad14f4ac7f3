"""A local tool's result past the cap: the model reads the head with a notice, the store
keeps the whole when it can; a result within the cap is untouched."""

from __future__ import annotations

from gloveapp.core import tool
from gloveapp.core.results import bound_result, head
from gloveapp.core.store import MemoryStore
from gloveapp.core.types import ToolResultData
from tests.core.support import calls, make_glove


class KeepingStore(MemoryStore):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.kept: dict[str, tuple[str, str]] = {}

    async def keep_tool_result(self, call_id: str, tool_name: str, whole: str) -> None:
        self.kept[call_id] = (tool_name, whole)


@tool(description="Dump a table.")
async def dump(rows: int) -> dict:
    return {"rows": [{"id": i, "name": "é" * 10} for i in range(rows)]}


async def run(rows: int, *, store):
    glove, _, _ = make_glove([calls(("dump", {"rows": rows})), "done"], tools=[dump], store=store)
    glove._executor.max_result_bytes = 4096
    await glove.process_request("dump it")
    [message] = [m for m in await store.get_messages() if m.tool_results]
    return message.tool_results[0]


async def test_a_large_local_result_is_cut_and_kept_whole():
    store = KeepingStore("s")

    result = await run(2000, store=store)

    assert isinstance(result.result.data, str)
    assert len(result.result.data.encode()) <= 4096
    assert "[Result truncated: the tool returned" in result.result.data
    assert result.result.extra["truncated"]["bytes"] > 4096
    [(name, whole)] = store.kept.values()
    assert name == "dump" and '"id": 1999' in whole


async def test_a_small_result_is_untouched():
    store = KeepingStore("s")

    result = await run(3, store=store)

    assert result.result.data == {"rows": [{"id": i, "name": "é" * 10} for i in range(3)]}
    assert store.kept == {}


def test_an_error_message_is_cut_too_and_no_character_is_split():
    huge = ToolResultData(status="error", message="ü" * 100_000, data=None)

    bounded, whole = bound_result(huge, 8192)

    assert whole is not None
    assert len(bounded.message.encode()) < 8192
    assert head("éé", 3) == "é"
