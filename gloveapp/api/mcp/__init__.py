"""The workspace's MCP server (`/mcp/<workspace_id>`) and the workspace inbox's REST routes."""
