"""glove-mcp's own bridge tests (packages/glove-mcp/tests/bridge.test.ts, exclude.test.ts),
run against our bridge: result shapes, descriptions and texts."""

from __future__ import annotations

from gloveapp.core.mcp import McpServerConfig, McpToolDef, bridge_mcp_tool, json_schema_to_shape
from gloveapp.core.mcp.connection import McpCallResult

SERVER = McpServerConfig(name="srv", url="http://127.0.0.1:1/mcp")


def fake_call(result: McpCallResult):
    async def call(server: str, tool: str, arguments: object) -> McpCallResult:
        return result

    return call


async def run(result: McpCallResult, tool: McpToolDef | None = None) -> dict:
    tool = tool or McpToolDef(name="t", input_schema={"type": "object"})
    bridged = bridge_mcp_tool(SERVER, tool, fake_call(result), server_mode=True)
    return (await bridged.run({}, None)).to_dict()


def test_it_renders_an_array_of_object_output_schema():
    shape = json_schema_to_shape(
        {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "number": {"type": "integer"},
                    "title": {"type": "string"},
                    "merged": {"type": "boolean"},
                },
            },
        }
    )
    assert shape == "{ number: number, title: string, merged: boolean }[]"


def test_it_folds_enum_and_const_to_a_literal_union():
    assert json_schema_to_shape({"type": "string", "enum": ["open", "closed"]}) == '"open"|"closed"'
    assert json_schema_to_shape({"const": "x"}) == '"x"'


def test_it_unions_any_of_variants_and_drops_null_in_tuple_types():
    assert json_schema_to_shape({"anyOf": [{"type": "string"}, {"type": "number"}]}) == (
        "string|number"
    )
    assert json_schema_to_shape({"type": ["string", "null"]}) == "string"


def test_it_infers_object_and_array_without_an_explicit_type():
    assert json_schema_to_shape({"properties": {"a": {"type": "string"}}}) == "{ a: string }"
    assert json_schema_to_shape({"items": {"type": "number"}}) == "number[]"


def test_it_gives_nothing_for_a_shapeless_node():
    assert json_schema_to_shape({}) is None
    assert json_schema_to_shape(None) is None


def test_it_appends_the_declared_result_shape_to_the_description():
    tool = McpToolDef(
        name="list_prs",
        description="List pull requests",
        input_schema={"type": "object", "properties": {}},
        output_schema={
            "type": "array",
            "items": {"type": "object", "properties": {"title": {"type": "string"}}},
        },
    )
    bridged = bridge_mcp_tool(SERVER, tool, fake_call(McpCallResult(content=[])))
    assert bridged.name == "srv__list_prs"
    assert bridged.description == "List pull requests\n\nReturns: { title: string }[]"


def test_it_leaves_the_description_alone_without_an_output_schema():
    tool = McpToolDef(name="t", description="Plain", input_schema={"type": "object"})
    assert bridge_mcp_tool(SERVER, tool, fake_call(McpCallResult(content=[]))).description == (
        "Plain"
    )
    nameless = McpToolDef(name="t", input_schema={"type": "object"})
    assert bridge_mcp_tool(SERVER, nameless, fake_call(McpCallResult(content=[]))).description == (
        "MCP tool t"
    )


async def test_it_prefers_structured_content_for_the_model():
    text = [{"type": "text", "text": "fallback text"}]
    result = await run(McpCallResult(content=text, structured_content={"count": 3}))
    assert result == {"status": "success", "data": '{"count":3}', "renderData": text}


async def test_it_falls_back_to_the_joined_text():
    parts = [{"type": "text", "text": "hello"}, {"type": "text", "text": "world"}]
    assert (await run(McpCallResult(content=parts)))["data"] == "hello\nworld"


async def test_it_surfaces_an_error_result_unchanged():
    parts = [{"type": "text", "text": "boom"}]
    result = await run(McpCallResult(content=parts, is_error=True))
    assert result == {"status": "error", "data": parts, "message": "boom"}
    empty = await run(McpCallResult(content=[], is_error=True))
    assert empty["message"] == "MCP tool t returned an error"


async def test_it_reports_a_401_as_auth_expired():
    async def unauthorized(server: str, tool: str, arguments: object) -> McpCallResult:
        raise RuntimeError("HTTP 401 Unauthorized")

    tool = McpToolDef(name="t", input_schema={"type": "object"})
    result = await bridge_mcp_tool(SERVER, tool, unauthorized).run({}, None)
    assert result.to_dict() == {"status": "error", "data": None, "message": "auth_expired"}


def test_it_gates_tools_as_glove_mcp_does():
    read_only = McpToolDef(name="r", input_schema={}, read_only=True)
    writes = McpToolDef(name="w", input_schema={})
    call = fake_call(McpCallResult(content=[]))
    assert bridge_mcp_tool(SERVER, read_only, call).requires_permission is False
    assert bridge_mcp_tool(SERVER, writes, call).requires_permission is True
    assert bridge_mcp_tool(SERVER, writes, call, server_mode=True).requires_permission is False
