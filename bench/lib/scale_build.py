"""bench/scale.py's database: millions of rows in a few INSERT ... SELECT generate_series.

Rows shaped like those the demo writes: chats of user text, the agent's tool call, its
result and the agent's reply (the `wire` text built by the code from real messages), one turn
per question, inbox items mostly consumed, approvals mostly decided, mesh deliveries, live
events, idempotency keys. Columns the statements do not name get their model's default, so a
field added later needs no change here unless it has none (then the error names it).
"""

from __future__ import annotations

import json
from typing import Any

from django.apps import apps
from django.db import models


def insert(connection: Any, model: Any, source: str, values: dict[str, str]) -> int:
    """INSERT INTO <model's table> (...) SELECT <values> <source>; every column not in
    `values` (SQL over `source`) takes the field's default. Returns the rows written."""
    columns, expressions, params = [], [], []
    for field in model._meta.concrete_fields:
        column = field.column
        if column in values:
            columns.append(column)
            # Literal SQL: its modulo signs are not placeholders.
            expressions.append(values[column].replace("%", "%%"))
        elif isinstance(field, models.AutoField | models.BigAutoField):
            continue
        elif getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            columns.append(column)
            expressions.append("now()")
        elif field.has_default() or field.has_db_default():
            if field.has_db_default():
                continue
            columns.append(column)
            expressions.append("%s")
            params.append(field.get_db_prep_save(field.get_default(), connection))
        elif field.null:
            continue
        else:
            raise ValueError(f"{model.__name__}.{field.name} has no default: name it in the build")
    sql = (
        f'INSERT INTO "{model._meta.db_table}" ({", ".join(f'"{c}"' for c in columns)}) '
        f"SELECT {', '.join(expressions)} {source.replace('%', '%%')}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def _literal(value: Any) -> str:
    """A Python value as an SQL string literal (for constant JSON and text)."""
    text = value if isinstance(value, str) else json.dumps(value)
    return "'" + text.replace("'", "''") + "'"


def _message_templates() -> list[dict[str, Any]]:
    """Four messages of a demo exchange, as the code stores them (columns and wire), their
    text replaced by TEXT_HERE in SQL."""
    from gloveapp.conversations import serialization
    from gloveapp.core.types import Message, ToolCall, ToolResult, ToolResultData

    call = ToolCall(tool_name="show_coffees", input_args={"origin": "Ethiopia"}, id="call_1")
    result = ToolResult(
        tool_name="show_coffees",
        call_id="call_1",
        result=ToolResultData(status="success", data={"coffees": ["Yirgacheffe", "Sidamo"]}),
    )
    messages = [
        Message(sender="user", text="TEXT_HERE"),
        Message(sender="agent", text="TEXT_HERE", tool_calls=[call]),
        Message(sender="user", text="tool results", tool_results=[result]),
        Message(sender="agent", text="TEXT_HERE"),
    ]
    templates = []
    for message in messages:
        fields = serialization.message_fields(message)
        wire = serialization.wire_json(serialization.wire_from_fields(fields))
        templates.append({"fields": fields, "wire": wire})
    return templates


def fill(connection: Any, shape: dict[str, int]) -> dict[str, Any]:
    User = apps.get_model("auth", "User")
    Session = apps.get_model("conversations", "Session")
    Message = apps.get_model("conversations", "Message")
    Turn = apps.get_model("turns", "Turn")
    InboxItem = apps.get_model("inbox", "InboxItem")
    ApprovalRequest = apps.get_model("approvals", "ApprovalRequest")
    ApprovalDecision = apps.get_model("approvals", "ApprovalDecision")
    MeshDelivery = apps.get_model("mesh", "MeshDelivery")
    LiveEvent = apps.get_model("live", "LiveEvent")
    IdempotentRequest = apps.get_model("conversations", "IdempotentRequest")

    users = max(shape["users"], shape["heavy_users"] + 1)
    heavy_users, per_heavy = shape["heavy_users"], shape["heavy_sessions"]
    sessions = max(shape["sessions"], heavy_users * per_heavy + 3)
    long_messages = shape["long_messages"]
    others = users - heavy_users

    insert(
        connection,
        User,
        f"FROM generate_series(1, {users}) g(i)",
        {
            "username": f"CASE WHEN g.i <= {heavy_users} THEN 'heavy' || g.i ELSE 'user' || g.i END",
            "password": "'!'",
            "email": "''",
            "first_name": "''",
            "last_name": "''",
            "is_staff": "false",
            "is_superuser": "false",
            "is_active": "true",
            "date_joined": "now() - interval '1 year'",
        },
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT min(id) FROM auth_user")
        first_user = cursor.fetchone()[0]
    # Session g.i: the heavy users own the first heavy_users * per_heavy (heavy1 owns s1 and
    # s2, the two long chats); the rest are spread over the other users. Normal chats have
    # 9 or 10 messages (about 9.8 on average), long ones `long_messages`.
    owner = (
        f"CASE WHEN g.i <= {heavy_users * per_heavy} THEN {first_user} + (g.i - 1) / {per_heavy} "
        f"ELSE {first_user} + {heavy_users} + (g.i % {others}) END"
    )
    last_seq = f"CASE WHEN g.i <= 2 THEN {long_messages} WHEN g.i % 5 = 0 THEN 9 ELSE 10 END"
    insert(
        connection,
        Session,
        f"FROM generate_series(1, {sessions}) g(i)",
        {
            "id": "'s' || g.i",
            "key": "'s' || g.i",
            "owner_id": owner,
            "title": "CASE WHEN g.i % 7 = 0 THEN 'Espresso for the office #' || g.i "
            "ELSE 'Do you have Yirgacheffe? #' || g.i END",
            "agent_name": "'coffee'",
            "last_seq": last_seq,
            "turn_count": f"({last_seq}) / 4",
            "token_count": f"({last_seq}) * 120",
            # What its turns used (each below: 900 in, 150 out), as a chat's usage reads.
            "tokens_in_total": f"(({last_seq}) + 3) / 4 * 900",
            "tokens_out_total": f"(({last_seq}) + 3) / 4 * 150",
            "created_at": f"now() - ({sessions} - g.i) * interval '20 seconds'",
            "updated_at": f"now() - ({sessions} - g.i) * interval '20 seconds'",
        },
    )
    templates = _message_templates()
    kind = "(m.seq % 4)"  # 1 question, 2 tool call, 3 tool result, 0 reply

    def pick(column: str, default: str = "NULL") -> str:
        branches = []
        for index, template in enumerate(templates):
            value = template["fields"].get(column)
            if column == "wire":
                value = template["wire"]
            sql = default if value is None else _literal(value)
            if column in ("content", "tool_calls", "tool_results", "extra") and value is not None:
                sql += "::jsonb"
            branches.append(f"WHEN {(index + 1) % 4} THEN {sql}")
        return f"CASE {kind} {' '.join(branches)} END"

    text = (
        "CASE (m.seq % 4) WHEN 1 THEN 'Do you have something fruity from Ethiopia? ' || m.seq "
        "WHEN 2 THEN 'Let me look.' WHEN 3 THEN 'tool results' "
        "ELSE 'Yes: Yirgacheffe, bright and floral, 18.50 a bag. Shall I add one? ' || m.seq END"
    )
    message_values = {
        "session_id": "'s' || g.i",
        "seq": "m.seq",
        "sender": pick("sender"),
        "text": text,
        "tool_calls": pick("tool_calls"),
        "tool_results": pick("tool_results"),
        "wire": f"replace({pick('wire')}, 'TEXT_HERE', {text})",
        "created_at": f"now() - ({sessions} - g.i) * interval '20 seconds' + m.seq * interval '1 second'",
    }
    messages = insert(
        connection,
        Message,
        f"FROM generate_series(1, {sessions}) g(i) "
        f"CROSS JOIN LATERAL generate_series(1, {last_seq}) m(seq)",
        message_values,
    )
    turns = insert(
        connection,
        Turn,
        f"FROM generate_series(1, {sessions}) g(i) "
        f"CROSS JOIN LATERAL generate_series(1, {last_seq}, 4) m(seq)",
        {
            "session_id": "'s' || g.i",
            "user_id": owner,
            "text": "'Do you have something fruity from Ethiopia? ' || m.seq",
            # Rare values the admin's filters must find without reading every turn: one
            # in a thousand from the API, one in five hundred retried, one in two hundred failed.
            "source": "CASE WHEN (g.i + m.seq) % 1000 = 0 THEN 'api' ELSE 'page' END",
            "status": "CASE WHEN (g.i + m.seq) % 200 = 0 THEN 'failed' ELSE 'done' END",
            "attempts": "CASE WHEN (g.i + m.seq) % 500 = 1 THEN 2 ELSE 1 END",
            "base_seq": "m.seq - 1",
            "end_seq": "m.seq + 3",
            "model": "'claude-sonnet-4-5'",
            "tokens_in": "900",
            "tokens_out": "150",
            "created_at": "now() - interval '1 day'",
            "started_at": "now() - interval '1 day'",
            "finished_at": "now() - interval '1 day'",
        },
    )
    # A hundredth of the inbox items sit in the first long chat (its inbox keeps growing).
    items = shape["inbox_items"]
    inbox = insert(
        connection,
        InboxItem,
        f"FROM generate_series(1, {items}) g(i)",
        {
            "id": "'inbox_' || g.i",
            "key": "'inbox_' || g.i",
            "session_id": f"CASE WHEN g.i % 100 = 0 THEN 's1' ELSE 's' || (g.i % {sessions} + 1) END",
            "tag": "CASE WHEN g.i % 10 = 0 THEN 'mesh:from:roastery' ELSE 'restock_watch' END",
            "request": "'Notify me when Yirgacheffe is restocked (' || g.i || ')'",
            "response": "CASE WHEN g.i % 100 = 1 THEN NULL ELSE 'Back in stock' END",
            "status": "CASE WHEN g.i % 100 = 1 THEN 'pending' ELSE 'consumed' END",
            "blocking": "false",
            "created_at": f"now() - ({items} - g.i) * interval '30 seconds'",
            "resolved_at": "CASE WHEN g.i % 100 = 1 THEN NULL ELSE now() END",
            "consumed_at": "CASE WHEN g.i % 100 = 1 THEN NULL ELSE now() END",
            "resolved_by": "CASE WHEN g.i % 100 = 1 THEN NULL ELSE 'user' END",
        },
    )
    opened, decided = shape["approvals_open"], shape["approvals_decided"]
    total = opened + decided
    approvals = insert(
        connection,
        ApprovalRequest,
        f"FROM generate_series(1, {total}) g(i)",
        {
            "id": "gen_random_uuid()",
            "session_id": f"CASE WHEN g.i % 50 = 0 THEN 's1' ELSE 's' || (g.i % {sessions} + 1) END",
            "tool_name": "'checkout'",
            "args": "jsonb_build_object('lines', jsonb_build_array(jsonb_build_object("
            "'sku', 'yirgacheffe', 'quantity', 6)), 'payment', 'pickup')",
            "fingerprint": "encode(sha256(g.i::text::bytea), 'hex')",
            "decisions": '\'["approve", "edit", "reject"]\'::jsonb',
            "status": f"CASE WHEN g.i <= {decided} THEN 'decided' ELSE 'open' END",
            # One decision in a thousand an edit (and the 60 oldest: a page of edits at the
            # small size too, last in the list's order), one in a hundred a rejection.
            "decision": f"CASE WHEN g.i > {decided} THEN '' "
            "WHEN g.i % 1000 = 0 OR g.i <= 60 THEN 'edit' "
            "WHEN g.i % 100 = 0 THEN 'reject' ELSE 'approve' END",
            "created_at": f"now() - ({total} - g.i) * interval '30 seconds'",
            "decided_at": f"CASE WHEN g.i <= {decided} THEN now() - ({total} - g.i) * interval '30 seconds' END",
        },
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM auth_user WHERE username = 'heavy1'")
        decider = cursor.fetchone()[0]
    insert(
        connection,
        ApprovalDecision,
        "FROM approvals_approvalrequest r WHERE r.status = 'decided'",
        {
            "request_id": "r.id",
            "kind": "'approve'",
            "user_id": str(decider),
            "username": "'heavy1'",
            "channel": "'page'",
            "fingerprint_seen": "r.fingerprint",
            "reason": "''",
            "text": "''",
            "decided_at": "r.decided_at",
        },
    )
    deliveries = insert(
        connection,
        MeshDelivery,
        f"FROM generate_series(1, {shape['mesh_deliveries']}) g(i)",
        {
            "message_id": "'m_' || g.i",
            "recipient": "CASE WHEN g.i % 2 = 0 THEN 'shop' ELSE 'roastery' END",
            "sender": "CASE WHEN g.i % 2 = 0 THEN 'roastery' ELSE 'shop' END",
            "kind": "'direct'",
            "body": "jsonb_build_object('text', 'Twelve bags of Yirgacheffe, please.')",
        },
    )
    events = insert(
        connection,
        LiveEvent,
        f"FROM generate_series(1, {shape['live_events']}) g(i)",
        {
            "stream": f"'session:s' || (g.i % {sessions} + 1)",
            # Each stream's events numbered 1, 2, 3... (g.i runs through the streams in turn).
            "seq": f"(g.i - 1) / {sessions} + 1",
            "type": "'message.appended'",
            "payload": "jsonb_build_object('seq', g.i % 10 + 1)",
        },
    )
    insert(
        connection,
        apps.get_model("live", "LiveStreamCounter"),
        f'FROM "{LiveEvent._meta.db_table}" GROUP BY stream',
        {"stream": "stream", "last_seq": "max(seq)"},
    )
    keys = insert(
        connection,
        IdempotentRequest,
        f"FROM generate_series(1, {shape['idempotency_keys']}) g(i)",
        {
            "user_id": f"{first_user} + g.i % {users}",
            "key": "'key_' || g.i",
            "scope": "'POST /api/sessions/s1/messages'",
            "fingerprint": "encode(sha256(g.i::text::bytea), 'hex')",
        },
    )
    # The usage page's raw material: each turn's attempt and model call, spread over the page's
    # longest window (90 days), summed by `usage_rollup` as a worker's scheduler would.
    TurnStep = apps.get_model("turns", "TurnStep")
    steps = insert(
        connection,
        TurnStep,
        "FROM turns_turn t CROSS JOIN LATERAL (VALUES ('attempt'), ('model')) k(kind)",
        {
            "turn_id": "t.id",
            "attempt": "t.attempts",
            "kind": "k.kind",
            "name": "CASE WHEN k.kind = 'model' THEN 'claude-sonnet-4-5' ELSE '' END",
            "started_at": "now() - (t.id % 90) * interval '1 day'",
            "duration_ms": "1200 + t.id % 700",
            "outcome": "CASE WHEN k.kind = 'attempt' THEN t.status ELSE 'success' END",
            "detail": "CASE WHEN k.kind = 'model' THEN "
            '\'{"input_tokens": 900, "output_tokens": 150}\'::jsonb END',
        },
    )
    # The database queue's task results (django-tasks-db's admin), one in fifty failed.
    TaskResult = apps.get_model("django_tasks_database", "DBTaskResult")
    tasks = insert(
        connection,
        TaskResult,
        f"FROM generate_series(1, {shape['task_results']}) g(i)",
        {
            "id": "gen_random_uuid()",
            "status": "CASE WHEN g.i % 50 = 0 THEN 'FAILED' ELSE 'SUCCESSFUL' END",
            "args_kwargs": "jsonb_build_object('args', jsonb_build_array('s' || g.i), 'kwargs', '{}'::jsonb)",
            "priority": "0",
            "task_path": "'gloveapp.turns.queue.tasks.run_session_turns'",
            "worker_ids": "'[]'::jsonb",
            # One in a thousand on the mesh queue, and the 60 oldest (a page at both sizes).
            "queue_name": "CASE WHEN g.i % 1000 = 0 OR g.i <= 60 THEN 'mesh' ELSE 'default' END",
            "backend_name": "'default'",
            "run_after": f"now() - ({shape['task_results']} - g.i) * interval '1 second'",
            "enqueued_at": f"now() - ({shape['task_results']} - g.i) * interval '1 second'",
            "started_at": "now()",
            "finished_at": "now()",
            "exception_class_path": "''",
            "traceback": "''",
        },
    )
    # An API token for every user (DRF's token admin lists them).
    Token = apps.get_model("authtoken", "Token")
    tokens = insert(
        connection,
        Token,
        "FROM auth_user u",
        {
            "key": "encode(sha256(u.id::text::bytea), 'hex')::varchar(40)",
            "user_id": "u.id",
            "created": "now()",
        },
    )
    ledger = _fill_budgets(connection, shape)
    logins = _fill_login_records(connection, shape, first_user, users)
    notifications = _fill_workspaces(connection, shape, first_user, users)
    return {
        "budget_ledger": ledger,
        "login_records": logins,
        "notifications": notifications,
        "turn_steps": steps,
        "task_results": tasks,
        "api_tokens": tokens,
        "users": users,
        "sessions": sessions,
        "messages": messages,
        "turns": turns,
        "inbox_items": inbox,
        "approvals": approvals,
        "mesh_deliveries": deliveries,
        "live_events": events,
        "idempotency_keys": keys,
        "long": "s1",
        "normal": "s3",
        "heavy_sessions": per_heavy,
    }


def _fill_budgets(connection: Any, shape: dict[str, int]) -> int:
    """Budgets, a counter each, and the ledger's settled reservations (bench/budgets.py's
    shape: the ledger is the table that grows)."""
    budgets = shape["budgets"]
    # A page of every filter value of the budgets' admin at the small size too.
    fill_budget_rules(connection, max(budgets, 1_000))
    insert(
        connection,
        apps.get_model("budgets", "BudgetCounter"),
        f"FROM generate_series(0, {budgets} - 1) g(n)",
        {
            "budget_key": "'b' || g.n",
            "window_key": "'u:' || g.n || '|d:2026-12-01'",
            "ends_at": "now() + interval '1 day'",
            "spent_usd": "1",
            "spent_tokens": "1000",
        },
    )
    return insert(
        connection,
        apps.get_model("budgets", "BudgetReservation"),
        f"FROM generate_series(0, {shape['budget_ledger']} - 1) g(n)",
        {
            "counter_id": f"1 + g.n % {budgets}",
            "budget_key": f"'b' || (g.n % {budgets})",
            "window_key": f"'u:' || (g.n % {budgets}) || '|d:2026-12-01'",
            "turn_id": "g.n / 3",
            "attempt": "1",
            "model": "'claude-sonnet-4-5'",
            "state": "CASE WHEN g.n % 100 = 0 THEN 'released' ELSE 'settled' END",
            "reserved_usd": "0.01",
            "settled_usd": "0.004",
            "reserved_tokens": "4000",
            "settled_tokens": "1500",
            "created_at": "now() - g.n * interval '1 second'",
            "settled_at": "now() - g.n * interval '1 second'",
        },
    )


def _fill_login_records(connection: Any, shape: dict[str, int], first_user: int, users: int) -> int:
    """django-axes' records: every login (the access log), the failed ones, and the
    attempts of the addresses still counted."""
    written = 0
    for label, count in (
        ("axes.AccessLog", shape["login_records"]),
        ("axes.AccessFailureLog", shape["login_records"] // 2),
        ("axes.AccessAttempt", shape["login_records"] // 100),
    ):
        model = apps.get_model(label)
        columns = {f.column for f in model._meta.concrete_fields}
        values = {
            "user_agent": "'Mozilla/5.0 (X11; Linux x86_64)'",
            "ip_address": "('10.' || (g.i / 65536 % 256) || '.' || (g.i / 256 % 256) || '.' "
            "|| (g.i % 256))::inet",
            "username": f"'user' || (g.i % {users} + 1)",
            "http_accept": "'text/html'",
            "path_info": "'/accounts/login/'",
            "attempt_time": f"now() - ({count} - g.i) * interval '2 seconds'",
            "session_hash": "encode(sha256(g.i::text::bytea), 'hex')",
            "locked_out": "g.i % 50 = 0",
            "get_data": "''",
            "post_data": "'username=user' || g.i",
            "failures_since_start": "1 + g.i % 4",
        }
        written += insert(
            connection,
            model,
            f"FROM generate_series(1, {count}) g(i)",
            {column: sql for column, sql in values.items() if column in columns},
        )
    return written


def _fill_workspaces(connection: Any, shape: dict[str, int], first_user: int, users: int) -> int:
    """A workspace (`w1`, the heavy user's) with its entries, and notifications to staff and
    customers (most of them outside any workspace)."""
    insert(
        connection,
        apps.get_model("inbox", "Workspace"),
        "FROM generate_series(1, 1) g(i)",
        {
            "id": "'w1'",
            "label": "'The roastery'",
            "root": "'/srv/workspaces/w1'",
            "owner_id": str(first_user),
            "token_hash": "encode(sha256('w1'::bytea), 'hex')",
            "created_at": "now()",
        },
    )
    insert(
        connection,
        apps.get_model("inbox", "WorkspaceEntry"),
        f"FROM generate_series(1, {shape['workspace_entries']}) g(i)",
        {
            "id": "gen_random_uuid()",
            "ts": "1700000000000 + g.i * 1000",
            "workspace_id": "'w1'",
            "workspace_label": "'The roastery'",
            "owner_id": str(first_user),
            "comments": "'Restock the Yirgacheffe ' || g.i",
        },
    )
    return insert(
        connection,
        apps.get_model("inbox", "Notification"),
        f"FROM generate_series(1, {shape['notifications']}) g(i)",
        {
            "user_id": f"{first_user} + g.i % {users}",
            "text": "'Twelve bags of Yirgacheffe arrived ' || g.i",
            "urgency": "CASE WHEN g.i % 20 = 0 THEN 'important' ELSE 'info' END",
            "workspace_id": "CASE WHEN g.i % 10 = 0 THEN 'w1' END",
            "created_at": f"now() - ({shape['notifications']} - g.i) * interval '3 seconds'",
        },
    )


def fill_budget_rules(connection: Any, budgets: int) -> None:
    """`budgets` budgets, each filter value of the admin's (scope, window, action, active)
    held by a share of them: a page of each at both sizes, not a full page against an
    empty one."""
    scopes = ["user", "group", "agent", "session", "everyone"]
    insert(
        connection,
        apps.get_model("budgets", "Budget"),
        f"FROM generate_series(0, {budgets} - 1) g(n)",
        {
            "key": "'b' || g.n",
            "scope": f"(ARRAY{scopes})[g.n % 5 + 1]",
            "target": "CASE WHEN g.n % 5 = 4 THEN '' ELSE 'target' || g.n END",
            "window": "(ARRAY['minute', 'turn', 'day', 'month'])[g.n / 5 % 4 + 1]",
            "cap_usd": "100",
            "action": "(ARRAY['warn', 'require_person', 'refuse'])[g.n / 20 % 3 + 1]",
            "active": "g.n % 7 <> 0",
        },
    )
