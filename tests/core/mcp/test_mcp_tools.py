"""An agent using real MCP servers' tools: mcp-server-time (stdio) and server-everything
(streamable HTTP), called by the scripted model through the agent loop."""

from __future__ import annotations

import asyncio
import json

import pytest

from gloveapp.core import Glove, MemoryStore
from gloveapp.core.mcp import McpToolbox, ToolListCache
from tests.core.support import calls, make_glove
from tests.mcp_servers import time_server

pytestmark = pytest.mark.timeout(120)


async def result_of(store: MemoryStore, index: int = 0) -> dict:
    messages = await store.get_messages()
    results = [r for m in messages if m.tool_results for r in m.tool_results]
    return results[index].result.to_dict()


async def run_with(toolbox: McpToolbox, script: list, **options) -> tuple[Glove, object, object]:
    await toolbox.start()
    glove, model, store = make_glove(script, tools=toolbox.tools, **options)
    try:
        await glove.process_request("What time is it?")
    finally:
        await toolbox.close()
    return glove, model, store


@pytest.mark.process
async def test_it_offers_the_time_servers_tools_with_their_schemas():
    toolbox = McpToolbox([time_server()])
    _, model, _ = await run_with(toolbox, ["It is time."])

    offered = {spec.name: spec for spec in model.calls[0].tools}
    assert {"time__get_current_time", "time__convert_time"} <= set(offered)
    schema = offered["time__get_current_time"].input_schema
    assert schema["required"] == ["timezone"]
    assert (
        offered["time__get_current_time"].description == "Get current time in a specific timezone"
    )


@pytest.mark.process
async def test_it_reads_the_real_time_from_the_stdio_server():
    toolbox = McpToolbox([time_server()])
    script = [calls(("time__get_current_time", {"timezone": "Asia/Tokyo"})), "Done."]
    _, model, store = await run_with(toolbox, script)

    result = await result_of(store)
    assert result["status"] == "success"
    answer = json.loads(result["data"])
    assert answer["timezone"] == "Asia/Tokyo" and answer["datetime"].endswith("+09:00")
    seen = model.calls[1].messages[-1].tool_results[0].result.data
    assert seen == result["data"]


@pytest.mark.process
async def test_it_returns_the_servers_text_to_the_model(everything):
    toolbox = McpToolbox([everything.entry()])
    script = [
        calls(("everything__get-sum", {"a": 2, "b": 3}), ("everything__echo", {"message": "hi"})),
        "Five.",
    ]
    _, _, store = await run_with(toolbox, script)

    assert (await result_of(store, 0))["data"] == "The sum of 2 and 3 is 5."
    assert (await result_of(store, 1))["data"] == "Echo: hi"
    assert (await result_of(store, 1))["renderData"] == [{"type": "text", "text": "Echo: hi"}]


@pytest.mark.process
async def test_it_prefers_structured_content(everything):
    toolbox = McpToolbox([everything.entry()])
    script = [calls(("everything__get-structured-content", {"location": "New York"})), "Ok."]
    _, model, store = await run_with(toolbox, script)

    offered = {spec.name: spec for spec in model.calls[0].tools}
    assert "\n\nReturns: { " in offered["everything__get-structured-content"].description
    data = (await result_of(store))["data"]
    assert isinstance(data, str) and json.loads(data)["temperature"] is not None
    assert ": " not in data  # JSON.stringify's compact form


@pytest.mark.process
async def test_it_uses_one_session_per_server_for_the_whole_turn(everything):
    toolbox = McpToolbox([everything.entry()])
    script = [
        calls(("everything__echo", {"message": "one"})),
        calls(("everything__echo", {"message": "two"})),
        calls(("everything__get-sum", {"a": 1, "b": 1})),
        "Done.",
    ]
    await toolbox.start()
    glove, _, _ = make_glove(script, tools=toolbox.tools)
    await glove.process_request("Go")
    sessions_during_turn = everything.sessions_started()
    open_during_turn = toolbox.open_sessions
    await toolbox.close()

    assert sessions_during_turn == 1
    assert open_during_turn == 1
    assert toolbox.open_sessions == 0


@pytest.mark.process
async def test_it_lists_the_tools_from_the_cache_until_refreshed(everything):
    cache = ToolListCache(ttl=3600)
    first = McpToolbox([everything.entry()], cache=cache)
    await first.start()
    await first.close()
    second = McpToolbox([everything.entry()], cache=cache)
    await second.start()
    sessions_after_cached_start = everything.sessions_started()
    await second.close()
    third = McpToolbox([everything.entry()], cache=cache)
    await third.start(refresh=True)
    await third.close()

    assert [t.name for t in second.tools] == [t.name for t in first.tools]
    assert sessions_after_cached_start == 1  # the second turn connected to nobody
    assert everything.sessions_started() == 2


@pytest.mark.process
async def test_it_connects_on_the_first_call_when_the_list_was_cached(everything):
    cache = ToolListCache(ttl=3600)
    async with McpToolbox([everything.entry()], cache=cache):
        pass
    toolbox = McpToolbox([everything.entry()], cache=cache)
    script = [calls(("everything__echo", {"message": "later"})), "Ok."]
    _, _, store = await run_with(toolbox, script)

    assert (await result_of(store))["data"] == "Echo: later"


@pytest.mark.process
async def test_it_keeps_the_agent_running_without_a_server_that_is_down():
    toolbox = McpToolbox(
        [time_server(), {"name": "gone", "url": "http://127.0.0.1:9/mcp", "connect_timeout": 5}]
    )
    _, model, _ = await run_with(toolbox, ["Still here."])

    assert [u.name for u in toolbox.unavailable] == ["gone"]
    assert "The MCP server 'gone' is unavailable (" in toolbox.unavailable[0].notice()
    names = [spec.name for spec in model.calls[0].tools]
    assert "time__get_current_time" in names and not any(n.startswith("gone__") for n in names)


@pytest.mark.process
async def test_it_gives_the_model_a_timeout_error(everything):
    toolbox = McpToolbox([everything.entry(timeout=0.5)])
    script = [
        calls(("everything__trigger-long-running-operation", {"duration": 30, "steps": 2})),
        calls(("everything__echo", {"message": "after"})),
        "Ok.",
    ]
    _, _, store = await run_with(toolbox, script)

    assert await result_of(store, 0) == {
        "status": "error",
        "data": None,
        # Named as the model called it, not as the server knows it.
        "message": "MCP tool everything__trigger-long-running-operation timed out after 0.5 s",
    }
    assert (await result_of(store, 1))["data"] == "Echo: after"  # the session is still usable


# Killed at once, or once its answer's event stream is open (the SDK then tries to resume
# the stream and gives up silently; the call must still fail now, not at its timeout).
@pytest.mark.process
@pytest.mark.parametrize("after", [0, 0.5])
async def test_it_gives_a_tool_error_when_the_server_is_killed_mid_call(everything, after):
    toolbox = McpToolbox([everything.entry(timeout=30)])
    script = [
        calls(("everything__trigger-long-running-operation", {"duration": 60, "steps": 60})),
        "The server went away.",
    ]
    await toolbox.start()
    glove, _, store = make_glove(script, tools=toolbox.tools)
    calls_before = everything.log().count("Received MCP POST request")

    async def kill_once_the_call_arrives() -> None:
        while everything.log().count("Received MCP POST request") <= calls_before:  # noqa: ASYNC110 (the server's log, another process)
            await asyncio.sleep(0.02)
        await asyncio.sleep(after)
        everything.kill()

    killer = asyncio.ensure_future(kill_once_the_call_arrives())
    result = await glove.process_request("Run the long operation")
    await killer
    await toolbox.close()

    assert result.messages[-1].text == "The server went away."
    outcome = await result_of(store)
    assert outcome["status"] == "error"
    assert outcome["message"].startswith("the connection to the MCP server was lost")


@pytest.mark.process
async def test_it_opens_a_lost_stdio_session_again_for_the_next_call():
    toolbox = McpToolbox([time_server()])
    await toolbox.start()
    first_session = toolbox._connections["time"]

    async def end_the_server(_prompt):
        await first_session.close()  # its child process ends with it
        return calls(("time__get_current_time", {"timezone": "UTC"}))

    script = [calls(("time__get_current_time", {"timezone": "UTC"})), end_the_server, "Ok."]
    glove, _, store = make_glove(script, tools=toolbox.tools)
    await glove.process_request("Time twice")
    second_session = toolbox._connections["time"]
    await toolbox.close()

    assert (await result_of(store, 1))["status"] == "success"
    assert second_session is not first_session


@pytest.mark.process
async def test_it_passes_a_servers_error_to_the_model(everything):
    toolbox = McpToolbox([everything.entry()])
    script = [calls(("everything__get-sum", {"a": "two", "b": 3})), "Ok."]
    _, _, store = await run_with(toolbox, script)

    outcome = await result_of(store)
    assert outcome["status"] == "error"
    assert "a" in outcome["message"] and outcome["message"]


@pytest.mark.process
async def test_it_prompts_for_tools_not_marked_read_only(everything):
    toolbox = McpToolbox([everything.entry()])
    await toolbox.start()
    permission = {t.name: t.requires_permission for t in toolbox.tools}
    await toolbox.close()

    assert permission["everything__echo"] is False  # readOnlyHint
    assert permission["everything__toggle-simulated-logging"] is True


@pytest.mark.process
async def test_a_bare_command_is_found_beside_python_when_the_path_lacks_the_virtualenv(
    monkeypatch,
):
    # As `make run` starts the worker: `.venv/bin/python manage.py turn_worker`, with the
    # virtual environment's bin/ not on the PATH.
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    toolbox = McpToolbox([{"name": "time", "command": "mcp-server-time"}])
    _, model, _ = await run_with(toolbox, ["Ok."])

    assert toolbox.unavailable == []
    assert "time__get_current_time" in [spec.name for spec in model.calls[0].tools]


async def test_a_missing_command_is_named_in_the_notice():
    toolbox = McpToolbox([{"name": "clock", "command": "no-such-mcp-server"}])
    await run_with(toolbox, ["Still here."])

    assert [u.name for u in toolbox.unavailable] == ["clock"]
    notice = toolbox.unavailable[0].notice()
    assert "'no-such-mcp-server' not found on the PATH" in notice, notice
