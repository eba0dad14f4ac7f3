"""The workspace MCP tools' names, descriptions and input schemas (a contract with agents).

The descriptions carry the seed's guidance on when to push, so any MCP client's model reads
it where it decides whether to call the tool.
"""

from __future__ import annotations

from inbox.workspaces.services import MAX_COMMENTS_CHARS, MAX_DOCS

SERVER_NAME = "glove-workspace"

INBOX_PUSH_DESCRIPTION = f"""\
Push an entry to the user's Inbox: the workspace → user channel. The entry surfaces in the \
Inbox page of the web UI, under this workspace's name.

Push when there's something the user should see, not on every operation:
- Finished a piece of work the user asked for → push with a docs pointer to the report.
- Blocked on a decision the user has to make → push with comments asking the question.
- Status check-in on a long-running job → optional comments summary plus any artifacts as docs.
- Internal tool calls, intermediate scratch, debugging output → don't push. That's what the \
workspace terminal is for.

Arguments:
- docs: pointers to files in the workspace, paths relative to the workspace root \
(e.g. "research/macro-2026-05-14.md"). They are rendered live in the inbox when the user \
opens the entry; no snapshot is taken, so later edits to the file are reflected on later \
reads. The workspace folder is the source of truth. At most {MAX_DOCS}; each must exist \
inside the workspace.
- comments: short Markdown — your voice to the user about what you did or want to ask. \
Renders below the docs.

At least one of docs or comments must be present. The workspace is known from the URL you \
are connected to; you never pass it.

The user can reply to an entry from the Inbox. Replies come back through inbox_read: check it \
for replies when you start working, after you push a question, and before you finish. The \
answer's `repliesWaiting` says how many replies wait for you now."""

INBOX_READ_DESCRIPTION = """\
Check for the user's replies, and read back this workspace's Inbox entries.

`replies` holds what the user wrote back to your entries since you last called inbox_read, \
oldest first: [{id, entryId, ts, from, text}]. Each reply is returned once, then counts as \
delivered, so act on it (or note it) when you read it. Call inbox_read when you start \
working, after you push a question, and before you finish.

`entries` is what you (or another agent in this workspace) already pushed, newest first, so \
you do not repeat yourself: [{id, ts, workspaceId, workspaceLabel, docs, comments}], with \
hasMore; pass the last entry's id as `before` for the next page."""

NOTIFY_USER_DESCRIPTION = """\
[DEPRECATED — legacy Automation path only] Inside a workspace, use inbox_push instead: it \
points at the workspace's files and keeps the conversation with the workspace. notify_user \
records a one-shot plain-text message (ideally under ~300 characters) in the user's legacy \
Notifications list, snapshotted at send time."""

INBOX_PUSH_SCHEMA = {
    "type": "object",
    "properties": {
        "docs": {
            "type": "array",
            "description": "Files in the workspace, paths relative to its root.",
            "items": {
                "type": "object",
                "properties": {"path": {"type": "string", "minLength": 1}},
                "required": ["path"],
            },
            "maxItems": MAX_DOCS,
        },
        "comments": {
            "type": "string",
            "description": "Markdown: your message to the user.",
            "maxLength": MAX_COMMENTS_CHARS,
        },
    },
}

INBOX_READ_SCHEMA = {
    "type": "object",
    "properties": {
        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
        "before": {"type": "string", "description": "An entry id: return entries older than it."},
    },
}

NOTIFY_USER_SCHEMA = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "minLength": 1},
        "urgency": {"type": "string", "enum": ["info", "important"], "default": "info"},
    },
    "required": ["text"],
}
