"""The staff approvals page at `/approvals/`: the queues, one request, deciding it.

An edge: each view checks who asks (staff; anyone else gets the same 404 whether or not a
request exists), reads through `approvals.selectors`, decides through `approval_decide` and
renders. It works without JavaScript (rows are links, the decision is a form);
`static/glove/approvals.js` adds j/k/Enter and a/x keys and live updates from the
`approvals` stream (`/ws/approvals/`).
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from gloveapp.approvals.access import is_approver
from gloveapp.approvals.notifications import link_request_id
from gloveapp.approvals.selectors import (
    VIEWS,
    approval_data,
    approval_visible,
    approvals_queue,
    decision_of,
    group_ids,
)
from gloveapp.approvals.services import (
    ApprovalConflict,
    ApprovalNotFound,
    DecisionInvalid,
    NotYoursToDecide,
    StaleDecision,
    approval_decide,
)
from gloveapp.core.approvals import APPROVE, EDIT, REJECT, RESPOND, Decision
from gloveapp.live.replay import current_cursor

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


def _view(request: HttpRequest) -> str:
    view = request.GET.get("view") or "all"
    return view if view in VIEWS else "all"


def _rows(user: Any, view: str, offset: int = 0) -> tuple[list[dict], bool, int]:
    rows = approvals_queue(user=user, view=view)
    page = list(rows[offset : offset + PAGE_SIZE + 1])
    groups = group_ids(user)
    data = [approval_data(row, user=user, group_ids=groups) for row in page[:PAGE_SIZE]]
    return data, len(page) > PAGE_SIZE, offset + PAGE_SIZE


def fields_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The arguments as form fields, typed by the tool's input schema."""
    schema = data.get("inputSchema") or {}
    properties = schema.get("properties") if isinstance(schema, dict) else None
    properties = properties if isinstance(properties, dict) else {}
    args = data["args"] if isinstance(data["args"], dict) else {}
    fields = []
    for name in [*properties, *[key for key in args if key not in properties]]:
        spec = properties.get(name) if isinstance(properties.get(name), dict) else {}
        kind = spec.get("type")
        value = args.get(name)
        if kind in ("integer", "number"):
            widget = "number"
        elif kind == "boolean":
            widget = "checkbox"
        elif kind == "string" or isinstance(value, str):
            widget = "text"
        else:
            widget = "json"
            value = json.dumps(value, ensure_ascii=False)
        fields.append(
            {
                "name": name,
                "label": spec.get("description") or name.replace("_", " "),
                "widget": widget,
                "value": value,
                "step": "1" if kind == "integer" else "any",
            }
        )
    return fields


def _detail(user: Any, row: Any, error: str = "", via: str = "") -> dict[str, Any]:
    data = approval_data(row, user=user, decision=decision_of(row))
    return {
        "via": via if via and link_request_id(via) == str(row.pk) else "",
        "request": data,
        "fields": fields_of(data),
        "editable": data["mayDecide"] and EDIT in data["decisions"],
        "conversation_url": reverse("admin:conversations_session_change", args=[row.session_id]),
        "error": error,
    }


@login_required
@require_GET
def approvals_page(request: HttpRequest) -> HttpResponse:
    _staff_only(request)
    view = _view(request)
    try:
        offset = max(0, int(request.GET.get("offset") or 0))
    except ValueError:
        offset = 0
    if request.GET.get("part") == "rows":
        rows, has_more, next_offset = _rows(request.user, view, offset)
        response = render(request, "approvals/_rows.html", {"rows": rows})
        response["X-Has-More"] = "1" if has_more else "0"
        response["X-Next-Offset"] = str(next_offset)
        return response
    last_event_id = current_cursor()
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
            "rows": rows,
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
    _staff_only(request)
    row = approval_visible(user=request.user, request_id=approval_id)
    if row is None:
        raise Http404("No such approval request.")
    if request.GET.get("part") == "row":
        data = approval_data(row, user=request.user)
        return render(request, "approvals/_rows.html", {"rows": [data]})
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
    edited = dict(row.args)
    for field in fields_of(data):
        key = f"arg__{field['name']}"
        if field["widget"] == "checkbox":
            edited[field["name"]] = key in form
            continue
        if key not in form:
            continue
        raw = form.get(key)
        if field["widget"] == "number":
            edited[field["name"]] = _number(raw, field)
        elif field["widget"] == "json":
            try:
                edited[field["name"]] = json.loads(raw)
            except ValueError:
                raise DecisionInvalid(f"{field['name']} is not JSON") from None
        else:
            edited[field["name"]] = raw
    return edited


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
    _staff_only(request)
    row = approval_visible(user=request.user, request_id=approval_id)
    if row is None:
        raise Http404("No such approval request.")
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
