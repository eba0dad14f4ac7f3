"""Turns in the admin: running, queued, failed and retried ones (the task backend's own
records are in its admin too: django-tasks-db's task results, RQ's dashboard)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

from gloveapp.budgets.selectors import budgets_spend_page
from gloveapp.conversations.admin import SessionAdmin
from gloveapp.conversations.models import Session
from gloveapp.lib.admin import ExactValueFilter, FixedChoicesFilter, ScaleAdmin, usable
from gloveapp.turns.models import Turn, TurnSlot
from gloveapp.turns.submit import MESH_SOURCE
from gloveapp.turns.timeline import session_timelines
from gloveapp.turns.usage import session_usage_cost, turn_cost
from gloveapp.turns.usage_report import MAX_DAYS, report_days, usage_report
from gloveapp.versions.selectors import published_budget_rules


class SourceFilter(FixedChoicesFilter):
    """Where turns come from (fixed in the code), not a DISTINCT over every turn."""

    title = "source"
    parameter_name = "source"
    field = "source"

    def fixed_choices(self) -> list[tuple[str, str]]:
        # Add a source here when an entry point starts turns under a new name.
        return [
            ("page", "chat page"),
            ("api", "REST API"),
            ("python", "Python (submit_message)"),
            (MESH_SOURCE, "mesh"),
        ]


class SessionIdFilter(ExactValueFilter):
    title = "session id"
    parameter_name = "session"
    field = "session_id"
    placeholder = "an exact session id"


class RetriedFilter(admin.SimpleListFilter):
    title = "retried"
    parameter_name = "retried"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("yes", "Retried after a worker stopped"), ("no", "First attempt")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Turn]) -> QuerySet[Turn]:
        if self.value() == "yes":
            return queryset.filter(attempts__gt=1)
        if self.value() == "no":
            return queryset.filter(attempts__lte=1)
        return queryset


class TurnSlotInline(admin.TabularInline):
    model = TurnSlot
    extra = 0
    can_delete = False
    fields = ("slot_id", "renderer", "tool_name", "status", "answer", "created_at")
    readonly_fields = fields


@admin.register(Turn)
class TurnAdmin(ScaleAdmin):
    list_display = (
        "id",
        "session_id",
        "user",
        "source",
        "status",
        "attempts",
        "worker_id",
        "created_at",
        "started_at",
        "finished_at",
        "agent_version",
        "cost",
    )
    # Newest first, backwards on the primary key; the other columns have no index of their
    # own, so they are not sortable.
    ordering = ("-id",)
    sortable_by = ("id",)
    list_filter = ("status", RetriedFilter, SourceFilter, SessionIdFilter)
    list_select_related = ("user", "agent_version")
    # A turn's number, its session's exact id (`session, status` index), its user's exact
    # username (`user, created_at` index). Not the text: no index holds it.
    search_exact = ("id", "session_id")
    search_usernames = ("user",)
    search_help_text = "A turn's number, an exact session id, or a user's exact username."
    readonly_fields = [field.name for field in Turn._meta.fields] + ["cost"]
    inlines = [TurnSlotInline]

    @admin.display(description="cost")
    def cost(self, turn: Turn) -> str:
        """Its usage priced by GLOVE_MODEL_PRICES; a model without a price: unknown."""
        if not (turn.tokens_in or turn.tokens_out or turn.cache_read_tokens):
            return "\u2014"
        return turn_cost(turn).text()

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Turns are posted through the chat, where the queue and the user's limit apply.
        return False


# The session's page gains its cost (the turns' usage, priced) and its turns' timeline: the
# conversations app knows nothing of turns, so the turns app extends its admin, as one
# extends the User admin.
admin.site.unregister(Session)


@admin.register(Session)
class SessionWithCostAdmin(SessionAdmin):
    def transcript_view(self, request: HttpRequest, object_id: str) -> Any:
        response = super().transcript_view(request, object_id)
        context = getattr(response, "context_data", None)
        session = context.get("session") if context else None
        if session is not None:
            context["session_cost"] = self.cost(session)
            # The newest turns' waterfalls (`?timeline_before=<turn id>` pages back).
            before = request.GET.get("timeline_before", "")
            context["timelines"] = session_timelines(
                session.pk, before=int(before) if before.isdigit() else None
            )
        return response

    @admin.display(description="cost")
    def cost(self, session: Session) -> str:
        """The turns' usage priced by GLOVE_MODEL_PRICES, per model; a model without a price
        (or tokens no turn recorded) makes the cost unknown, never 0."""
        found = session_usage_cost(session)
        if not found.by_model:
            return "\u2014 (no model calls yet)"
        parts = ", ".join(
            f"{model}: {'unknown' if amount is None else f'${amount:.6f}'}"
            for model, amount in found.by_model.items()
        )
        return f"{found.text()} ({parts})"


def usage_page(request: HttpRequest) -> TemplateResponse:
    """`/admin/usage/`: turns, durations, tokens, cost, tool failures, waits and the queue,
    per day (`?days=`, at most MAX_DAYS), drawn as charts (staff who may view turns)."""
    if not request.user.has_perm("turns.view_turn"):
        raise PermissionDenied
    days = report_days(request.GET.get("days", ""))
    report = usage_report(days=days)
    # The budgets by id, a page at a time (`?budgets_after=<id>`).
    after = request.GET.get("budgets_after", "")
    budgets, budgets_next = budgets_spend_page(
        after=after if usable(after) else "", versions=published_budget_rules()
    )
    context = {
        "budgets": budgets,
        "budgets_next": budgets_next,
        **admin.site.each_context(request),
        "title": "Usage",
        "report": report,
        "chart_data": {"days": report.days, "charts": report.charts},
        "days": days,
        "day_choices": [7, 14, 30, MAX_DAYS],
    }
    return TemplateResponse(request, "admin/turns/usage.html", context)


class QueueNameFilter(ExactValueFilter):
    title = "queue"
    parameter_name = "queue_name"
    field = "queue_name"
    placeholder = "an exact queue name"


def _register_task_results_admin() -> None:
    """django-tasks-db's task results, bounded like every list here: its admin sorted the
    whole table (no index on `enqueued_at`), counted it, listed facets and offered any page.
    The indexes its list and filters read are `glove_task_result_enqueued_idx`,
    `glove_task_result_status_idx` and `glove_task_result_queue_idx`; a priority filter (a
    DISTINCT-like range of every value) is left out."""
    from django_tasks_db.admin import DBTaskResultAdmin
    from django_tasks_db.models import DBTaskResult

    if admin.site.is_registered(DBTaskResult):
        admin.site.unregister(DBTaskResult)

    class ScaleTaskResultAdmin(ScaleAdmin, DBTaskResultAdmin):
        # Newest first on `glove_task_result_enqueued_idx`; a status or a queue on theirs.
        ordering = ("-enqueued_at",)
        sortable_by = ("enqueued_at",)
        list_filter = ("status", QueueNameFilter)
        search_exact = ("id",)
        search_help_text = "A task's id."
        list_display = tuple(
            "task" if name == "task_name" else name for name in DBTaskResultAdmin.list_display
        )

        @admin.display(description="task")
        def task(self, result: DBTaskResult) -> str:
            # From its path, never by loading the task: a result whose queue or backend the
            # settings no longer name made the package's column (and the list) fail.
            return result.task_path.rsplit(".", 1)[-1]

    admin.site.register(DBTaskResult, ScaleTaskResultAdmin)


_register_task_results_admin()
