"""The staff approvals page at `/approvals/`: the queues, one request, deciding it.

An edge: each view checks who asks (staff; anyone else gets the same 404 whether or not a
request exists), reads through `approvals.selectors`, decides through `approval_decide` and
renders. It works without JavaScript (rows are links, the decision is a form);
`static/glove/approvals.js` adds j/k/Enter (`list_nav.js`, shared with the inbox) and a/x
keys and live updates from the `approvals` stream (`/ws/approvals/`).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from django.contrib.admin.utils import quote
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET, require_POST

from gloveapp.approvals.access import asked_by, is_approver
from gloveapp.approvals.notifications import link_request_id
from gloveapp.approvals.selectors import (
    VIEWS,
    approval_data,
    approval_visible,
    decision_of,
    queue_rows,
)
from gloveapp.approvals.services import (
    ApprovalConflict,
    ApprovalNotFound,
    DecisionInvalid,
    NotYoursToDecide,
    StaleDecision,
    approval_decide,
)
from gloveapp.core.approvals.decisions import APPROVE, EDIT, REJECT, RESPOND, Decision
from gloveapp.core.approvals.edits import args_changes
from gloveapp.live.replay import current_cursor
from gloveapp.live.streams import approvals_stream

PAGE_SIZE = 50
VIEW_LABELS = {
    "mine": "Assigned to me",
    "groups": "My groups",
    "unassigned": "Unassigned",
    "overdue": "Overdue",
    "all": "All open",
}


def _staff_only(request: HttpRequest) -> None:
    if not is_approver(request.user):
        raise Http404("No such page.")


def _visible_or_404(request: HttpRequest, approval_id: str) -> Any:
    """The approval request this staff member may see; any other id is the same 404."""
    _staff_only(request)
    row = approval_visible(user=request.user, request_id=approval_id)
    if row is None:
        raise Http404("No such approval request.")
    return row


def _view(request: HttpRequest) -> str:
    view = request.GET.get("view") or "all"
    return view if view in VIEWS else "all"


def _rows(user: Any, view: str, offset: int = 0) -> tuple[list[dict], bool, int]:
    rows, has_more = queue_rows(user=user, view=view, offset=offset, limit=PAGE_SIZE)
    return rows, has_more, offset + PAGE_SIZE


def rows_html(rows: list[dict[str, Any]]) -> SafeString:
    """The list's rows (`approval_data`'s or `queue_rows`' dicts) as `<li>` items: one loop
    in Python, the detail route reversed once (a template per row cost more than the
    queries of the page)."""
    detail = reverse("approval-detail", args=["APPROVAL_ID"])
    out = []
    for row in rows:
        pk = escape(row["id"])
        seconds = row["secondsLeft"]
        assignee, escalate_to = row["assignee"], row["escalateTo"]
        if assignee["user"]:
            who = "@" + escape(assignee["user"])
        elif assignee["group"]:
            who = escape(assignee["group"])
        else:
            who = "unassigned"
        if row["escalatedAt"]:
            who += " · escalated to " + escape(escalate_to["group"] or escalate_to["user"] or "")
        customer = escape(row.get("customer") or "someone")
        what = escape(row.get("label") or row["tool"])
        summary = escape(row.get("summary") or "")
        total = escape(row.get("total") or "")
        out.append(
            f'<li class="inbox-row approvals-row{"" if row["status"] == "open" else " is-read"}"'
            f' data-id="{pk}" data-expires="{escape(row["expiresAt"] or "")}">\n'
            f'  <a class="inbox-row__link" href="?request={pk}"'
            f' data-detail-url="{detail.replace("APPROVAL_ID", pk)}">\n'
            '    <span class="inbox-row__dot" aria-hidden="true"></span>\n'
            f'    <span class="inbox-row__label"><span class="approvals-row__customer">{customer}'
            f'</span> · <span class="approvals-row__what" title="{escape(row["tool"])}">{what}'
            "</span></span>\n"
            '    <span class="inbox-row__time"'
            f' data-seconds-left="{"" if seconds is None else seconds}">'
            f"{escape(row['status']) if seconds is None else _left(seconds)}</span>\n"
            + (f'    <span class="approvals-row__summary">{summary}</span>\n' if summary else "")
            + '    <span class="inbox-row__preview">'
            + (f'<strong class="approvals-row__total">{total}</strong> · ' if total else "")
            + f"{who}</span>\n"
            "  </a>\n"
            "</li>\n"
        )
    return mark_safe("".join(out))  # every value above is escaped


def _left(seconds: int) -> str:
    """ "14m 5s left", as approvals.js counts it down."""
    if seconds >= 3600:
        return f"{seconds // 3600}h {seconds % 3600 // 60}m left"
    if seconds >= 60:
        return f"{seconds // 60}m {seconds % 60}s left"
    return f"{seconds}s left"


def _rows_response(rows: list[dict[str, Any]]) -> HttpResponse:
    return HttpResponse(rows_html(rows))


def _widget(spec: dict[str, Any], value: Any) -> str:
    kind = spec.get("type")
    if isinstance(spec.get("enum"), list) and spec["enum"]:
        return "select"
    if kind in ("integer", "number") or (
        isinstance(value, int | float) and not isinstance(value, bool)
    ):
        return "number"
    if kind == "boolean" or isinstance(value, bool):
        return "checkbox"
    if kind == "string" or isinstance(value, str):
        return "text"
    return "json"


def _resolved(spec: Any, root: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """A property's schema with its local `$ref` followed and an optional (`anyOf` with
    null) unwrapped: what the widget is chosen by."""
    if not isinstance(spec, dict) or depth > 8:
        return {}
    ref = spec.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        node: Any = root
        for part in ref[2:].split("/"):
            node = node.get(part) if isinstance(node, dict) else None
        return _resolved(node, root, depth + 1) | {
            key: value for key, value in spec.items() if key != "$ref"
        }
    options = spec.get("anyOf") or spec.get("oneOf")
    if isinstance(options, list):
        real = [option for option in options if option != {"type": "null"}]
        if len(real) == 1:
            return _resolved(real[0], root, depth + 1) | {
                key: value for key, value in spec.items() if key not in ("anyOf", "oneOf")
            }
    return spec


def _rows_of(value: Any) -> bool:
    """A list of flat objects (an order's lines): shown as one field per cell."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(row, dict)
            and all(not isinstance(cell, dict | list) for cell in row.values())
            for row in value
        )
    )


def fields_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The arguments as form fields, typed by the tool's input schema (else by value):
    an enum is a select, a number carries its bounds; a list of flat objects becomes a
    field per cell, named `name.index.key`."""
    schema = data.get("inputSchema") or {}
    schema = schema if isinstance(schema, dict) else {}
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    args = data["args"] if isinstance(data["args"], dict) else {}
    fields = []
    for name in [
        *[key for key in properties if key in args],
        *[k for k in args if k not in properties],
    ]:
        spec = _resolved(properties.get(name), schema)
        value = args.get(name)
        if _rows_of(value):
            items = _resolved(spec.get("items"), schema)
            cells = items.get("properties") if isinstance(items.get("properties"), dict) else {}
            for index, row in enumerate(value):
                title = next((cell for cell in row.values() if isinstance(cell, str)), "")
                for key, cell in row.items():
                    fields.append(
                        _field(
                            f"{name}.{index}.{key}",
                            f"{title or name} · {key}",
                            _resolved(cells.get(key), schema),
                            cell,
                        )
                    )
            continue
        label = name.replace("_", " ")
        fields.append(_field(name, label, spec, value, help=spec.get("description") or ""))
    return fields


def _field(
    name: str, label: str, spec: dict[str, Any], value: Any, help: str = ""
) -> dict[str, Any]:
    widget = _widget(spec, value)
    kind = spec.get("type")
    integer = kind == "integer" or (
        kind is None and isinstance(value, int) and not isinstance(value, bool)
    )
    options: list[tuple[str, str]] = []
    if widget == "select":
        choices = list(spec["enum"])
        if value not in choices:
            choices.insert(0, value)  # what the call has, even off the list, stays shown
        options = [(_option(choice), _option(choice).replace("_", " ")) for choice in choices]
    bounds = {
        key: spec[key]
        for key in ("minimum", "maximum")
        if isinstance(spec.get(key), int | float) and not isinstance(spec.get(key), bool)
    }
    return {
        "name": name,
        "label": label,
        "help": help,
        "widget": widget,
        "value": json.dumps(value, ensure_ascii=False) if widget == "json" else value,
        "original": _option(value) if widget != "json" else json.dumps(value, ensure_ascii=False),
        "options": options,
        "choices": spec.get("enum") if widget == "select" else None,
        "min": bounds.get("minimum"),
        "max": bounds.get("maximum"),
        "step": "1" if integer else "any",
    }


def _option(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _detail(user: Any, row: Any, error: str = "", via: str = "") -> dict[str, Any]:
    data = approval_data(row, user=user, decision=decision_of(row))
    decided = data["decision"] or {}
    return {
        "via": via if via and link_request_id(via) == str(row.pk) else "",
        "request": data,
        "fields": fields_of(data),
        # The audit: what an edit changed, field by field.
        "changes": args_changes(row.args, decided["args"]) if decided.get("args") else [],
        "editable": data["mayDecide"] and EDIT in data["decisions"],
        "asked_by_you": asked_by(user, row),
        "conversation_url": reverse(
            "admin:conversations_session_change", args=[quote(row.session_id)]
        ),
        "error": error,
    }


@login_required
@require_GET
def approvals_page(request: HttpRequest) -> HttpResponse:
    _staff_only(request)
    view = _view(request)
    try:
        # Bounded: an OFFSET past the database's integers would be a 500.
        offset = min(max(0, int(request.GET.get("offset") or 0)), 10**9)
    except ValueError:
        offset = 0
    if request.GET.get("part") == "rows":
        rows, has_more, next_offset = _rows(request.user, view, offset)
        response = _rows_response(rows)
        response["X-Has-More"] = "1" if has_more else "0"
        response["X-Next-Offset"] = str(next_offset)
        return response
    last_event_id = current_cursor(approvals_stream())
    rows, has_more, next_offset = _rows(request.user, view)
    selected = None
    wanted = request.GET.get("request")
    if wanted:
        row = approval_visible(user=request.user, request_id=wanted)
        if row is not None:
            selected = _detail(request.user, row, via=request.GET.get("via") or "")
    return render(
        request,
        "approvals/approvals.html",
        {
            "queue_page": "approvals",  # the ids of glove/queue_page.html
            "rows": rows,
            "rows_html": rows_html(rows),
            "has_more": has_more,
            "next_offset": next_offset,
            "view": view,
            "views": [(key, VIEW_LABELS[key]) for key in VIEWS],
            "selected": selected,
            "last_event_id": last_event_id,
        },
    )


@login_required
@require_GET
def approval_detail(request: HttpRequest, approval_id: str) -> HttpResponse:
    row = _visible_or_404(request, approval_id)
    if request.GET.get("part") == "row":
        data = approval_data(row, user=request.user)
        return _rows_response([data])
    return render(request, "approvals/_detail.html", _detail(request.user, row))


def decision_from_form(row: Any, form: Any) -> Decision:
    """The form's decision: Approve with changed arguments is an edit (where allowed)."""
    kind = form.get("decision") or ""
    seen = form.get("fingerprint") or ""
    if kind == APPROVE and EDIT in row.decisions and isinstance(row.args, dict):
        edited = _edited_args(row, form)
        if edited != row.args:
            return Decision(EDIT, seen, args=edited)
    if kind == REJECT:
        return Decision(REJECT, seen, reason=form.get("reason") or None)
    if kind == RESPOND:
        return Decision(RESPOND, seen, text=form.get("text") or None)
    if kind in (APPROVE, EDIT):
        args = _edited_args(row, form) if kind == EDIT else None
        return Decision(kind, seen, args=args)
    raise DecisionInvalid("choose approve, reject or respond")


def _edited_args(row: Any, form: Any) -> dict[str, Any]:
    data = {"args": row.args, "inputSchema": row.input_schema}
    edited = copy.deepcopy(row.args)
    for field in fields_of(data):
        key = f"arg__{field['name']}"
        if field["widget"] == "checkbox":
            value: Any = key in form
        elif key not in form:
            continue
        elif field["widget"] == "number":
            value = _number(form.get(key), field)
        elif field["widget"] == "select":
            chosen = form.get(key)
            typed = [c for c in [*(field["choices"] or []), _at(row.args, field["name"])]]
            value = next((c for c in typed if _option(c) == chosen), chosen)
        elif field["widget"] == "json":
            try:
                value = json.loads(form.get(key))
            except ValueError:
                raise DecisionInvalid(f"{field['name']} is not JSON") from None
        else:
            value = form.get(key)
        _put(edited, field["name"], value)
    return edited


def _at(args: Any, name: str) -> Any:
    """The value at `name` (`key` or `key.index.cell`) in `args`, or None."""
    node = args
    for part in name.split("."):
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _put(args: dict[str, Any], name: str, value: Any) -> None:
    """Set `name` (`key`, or `key.index.cell` for a row's cell) in `args`."""
    path = name.split(".")
    rows = args.get(path[0]) if len(path) == 3 and path[1].isdigit() else None
    if isinstance(rows, list) and int(path[1]) < len(rows) and isinstance(rows[int(path[1])], dict):
        rows[int(path[1])][path[2]] = value
    else:
        args[name] = value


def _number(raw: str, field: dict[str, Any]) -> Any:
    try:
        number = float(raw)
    except (TypeError, ValueError):
        raise DecisionInvalid(f"{field['name']} must be a number") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise DecisionInvalid(f"{field['name']} must be a number")
    return int(number) if field["step"] == "1" and number.is_integer() else number


@login_required
@require_GET
def approval_link(request: HttpRequest, token: str) -> HttpResponse:
    """The signed one-click link of an approval email: the request's decision page (after
    the login page, for someone not signed in). A forged or expired link is a 404."""
    _staff_only(request)
    request_id = link_request_id(token)
    if request_id is None or approval_visible(user=request.user, request_id=request_id) is None:
        raise Http404("No such approval request.")
    return redirect(f"{reverse('approvals')}?request={request_id}&via={token}")


def _channel(row: Any, form: Any) -> str:
    """ "email" when the decision is taken on the page a signed email link opened."""
    via = form.get("via") or ""
    return "email" if via and link_request_id(via) == str(row.pk) else "page"


@login_required
@require_POST
def approval_decide_page(request: HttpRequest, approval_id: str) -> HttpResponse:
    row = _visible_or_404(request, approval_id)
    error, status = "", 200
    try:
        decision = decision_from_form(row, request.POST)
        approval_decide(
            request_id=row.pk,
            decision=decision,
            user=request.user,
            channel=_channel(row, request.POST),
        )
    except ApprovalNotFound:
        raise Http404("No such approval request.") from None
    except NotYoursToDecide as refused:
        error, status = str(refused), 403
    except (DecisionInvalid, ValueError) as refused:
        error, status = str(refused), 400
    except StaleDecision:
        error, status = "The arguments changed since you opened this request; reload it.", 409
    except ApprovalConflict as lost:
        error, status = str(lost), 409
    if not request.htmx:
        if error:
            return render(
                request, "approvals/_detail.html", _detail(request.user, row, error), status=status
            )
        return redirect(f"{reverse('approvals')}?request={row.pk}")
    row.refresh_from_db()
    # HTMX swaps the detail in place, whatever the outcome (an error shows in it).
    return render(request, "approvals/_detail.html", _detail(request.user, row, error))
