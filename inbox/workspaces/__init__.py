"""The workspace inbox: agents in a workspace push entries (file pointers + Markdown) to its owner.

The domain lives here: models, paths (Django-free), services, selectors, exchange (JSONL),
render (docs read from disk as safe HTML), tools (the MCP tools' contract), admin. Its edges
sit in the edge packages: `gloveapp.api.mcp.server` (the MCP server at /mcp/<id>),
`gloveapp.api.mcp.inbox` (REST), `gloveapp.pages.workspace_inbox` and
`gloveapp.pages.workspace_consumer` (the page and its websocket).
"""
