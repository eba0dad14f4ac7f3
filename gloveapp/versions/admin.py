"""Agent versions in the admin: an agent's draft and published version (edit the draft, see
its diff against the published one, publish, roll back), and replay runs with their report.
Every write calls `services` or `tasks`; a version itself is read only."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from gloveapp.agents.config import agent_names
from gloveapp.conversations.admin import AgentFilter
from gloveapp.lib.admin import ScaleAdmin, usable
from gloveapp.versions import services
from gloveapp.versions.models import (
    AgentPointer,
    AgentVersion,
    PublishRequest,
    ReplayResult,
    ReplayRun,
)
from gloveapp.versions.promotion import publish_request, publish_requests_settle
from gloveapp.versions.report import ChecksInvalid, parse_checks
from gloveapp.versions.runs import sample_sessions
from gloveapp.versions.selection import SelectionInvalid, parse_ids, sessions_from_admin_filter
from gloveapp.versions.selectors import values_of, version_diff
from gloveapp.versions.tasks import replay_run_start

REPLAY_SAMPLE = 20


class JSONText(forms.CharField):
    """A JSON value typed as text (null allowed where `allow_null`)."""

    def __init__(self, *, allow_null: bool = False, empty: Any = None, **kwargs: Any) -> None:
        self.allow_null = allow_null
        self.empty = {} if empty is None else empty
        super().__init__(widget=forms.Textarea(attrs={"rows": 4}), required=False, **kwargs)

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        return json.dumps(value, indent=2, sort_keys=True)

    def clean(self, value: Any) -> Any:
        text = (value or "").strip()
        if not text or text == "null":
            if self.allow_null:
                return None
            return type(self.empty)()
        try:
            return json.loads(text)
        except ValueError as error:
            raise forms.ValidationError(f"Not JSON: {error}") from None


class DraftForm(forms.Form):
    system_prompt = forms.CharField(widget=forms.Textarea(attrs={"rows": 12}))
    model = forms.CharField(
        required=False, help_text="A 'provider:model' spec; empty: the agent's own."
    )
    model_settings = JSONText(help_text="The model adapter's keyword arguments, as JSON.")
    tools = JSONText(allow_null=True, help_text="A JSON list of tool names; null: all the code's.")
    mcp_servers = JSONText(
        allow_null=True, help_text="A JSON list of MCP server names; null: all the code's."
    )
    approval_policies = JSONText(
        help_text='Per tool, approval parameters: {"checkout": {"assignee_group": "managers"}}.'
    )
    budgets = JSONText(
        empty=[],
        help_text="A JSON list of this agent's budgets, as GLOVE_BUDGETS writes them: "
        '[{"id": "daily", "scope": "user", "window": "day", "cap_usd": "0.50", '
        '"action": "refuse"}] caps each user\'s spend on this agent a day. They apply while '
        "the version is published; an id keeps its counters from version to version.",
    )
    note = forms.CharField(required=False, help_text="What changed and why.")


class ChecksForm(forms.Form):
    publish_needs_approval = forms.BooleanField(
        required=False,
        label="Publishing needs an approval",
        help_text="Publish asks a person in /approvals/, with the replay report linked.",
    )
    checks = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 6}),
        help_text='One a line: must_call TOOL [when "PHRASE"], must_not_call TOOL, '
        'says "PHRASE", never_says "PHRASE", asks_approval TOOL, cost_below DOLLARS, '
        "tokens_below TOKENS.",
    )

    def clean_checks(self) -> str:
        text = self.cleaned_data["checks"]
        try:
            parse_checks(text)
        except ChecksInvalid as error:
            raise forms.ValidationError(str(error)) from None
        return text


class ReplayForm(forms.Form):
    ids = forms.CharField(required=False, help_text="Session ids, comma or space separated.")
    sample = forms.IntegerField(
        required=False, min_value=1, max_value=10_000, help_text="Or: this many at random."
    )
    filter = forms.CharField(
        required=False, help_text="Or: the query string of a filtered sessions list (q=refund)."
    )
    unseen_tools = forms.ChoiceField(
        choices=ReplayRun._meta.get_field("unseen_tools").choices,
        initial="mark",
        required=False,
        label="Calls never recorded",
        help_text="Mark them, or run the tool in a sandbox: its database writes are rolled "
        "back, its e-mails and HTTP calls are not.",
    )


@admin.register(AgentPointer)
class AgentPointerAdmin(ScaleAdmin):
    """One row per agent: its draft and published versions, and the page to move them."""

    list_display = ("agent_name", "draft", "published", "updated_at")
    list_select_related = ("draft", "published")
    change_form_template = "admin/versions/agent.html"
    change_list_template = "admin/versions/agents.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view
        return [
            path("start/<str:agent_name>/", view(self.start_view), name="versions_agent_start"),
            *super().get_urls(),
        ]

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        known = set(AgentPointer.objects.values_list("agent_name", flat=True))
        extra = {"unversioned": [name for name in agent_names() if name not in known]}
        return super().changelist_view(request, {**(extra_context or {}), **extra})

    def start_view(self, request: HttpRequest, agent_name: str) -> HttpResponse:
        """An agent with no pointer yet gets one, its first draft to come from the code."""
        if not self.has_change_permission(request) or agent_name not in agent_names():
            raise PermissionDenied
        AgentPointer.objects.get_or_create(agent_name=agent_name)
        return HttpResponseRedirect(
            reverse("admin:versions_agentpointer_change", args=[agent_name])
        )

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> Any:
        pointer = get_object_or_404(
            AgentPointer.objects.select_related("draft", "published"),
            pk=object_id if usable(object_id) else "",
        )
        if not self.has_view_or_change_permission(request, pointer):
            raise PermissionDenied
        may_change = self.has_change_permission(request, pointer)
        base = pointer.draft or pointer.published
        draft_form = DraftForm(initial=values_of(base, pointer.agent_name))
        # Approvals decided since the last look are applied first (the sweep does it too).
        publish_requests_settle(agent_name=pointer.agent_name)
        pointer.refresh_from_db()
        checks_form = ChecksForm(
            initial={
                "checks": pointer.checks,
                "publish_needs_approval": pointer.publish_needs_approval,
            }
        )
        replay_form = ReplayForm(initial={"sample": REPLAY_SAMPLE})
        if request.method == "POST":
            if not may_change:
                raise PermissionDenied
            action = request.POST.get("action", "")
            done = self._act(request, pointer, action)
            if done is not None:
                return done
            if action == "draft":
                draft_form = DraftForm(request.POST)
                if draft_form.is_valid():
                    values = dict(draft_form.cleaned_data)
                    note = values.pop("note")
                    try:
                        version = services.version_draft(
                            agent_name=pointer.agent_name, author=request.user, note=note, **values
                        )
                    except ValueError as error:
                        draft_form.add_error(None, str(error))
                    else:
                        messages.success(request, f"{version} is the draft.")
                        return HttpResponseRedirect(request.path)
            elif action == "checks":
                checks_form = ChecksForm(request.POST)
                if checks_form.is_valid():
                    AgentPointer.objects.filter(pk=pointer.pk).update(
                        checks=checks_form.cleaned_data["checks"],
                        publish_needs_approval=checks_form.cleaned_data["publish_needs_approval"],
                    )
                    messages.success(request, "The checks and the publishing rule are saved.")
                    return HttpResponseRedirect(request.path)
            elif action == "replay":
                replay_form = ReplayForm(request.POST)
                started = self._replay(request, pointer, replay_form)
                if started is not None:
                    return started
        diff = (
            version_diff(
                pointer.published, pointer.draft, old_label=self._label(pointer.published, pointer)
            )
            if pointer.draft is not None and pointer.draft_id != pointer.published_id
            else []
        )
        context = {
            **self.admin_site.each_context(request),
            "title": f"Agent {pointer.agent_name}",
            "opts": self.model._meta,
            "pointer": pointer,
            "may_change": may_change,
            "draft_form": draft_form,
            "checks_form": checks_form,
            "replay_form": replay_form,
            "diff": diff,
            "versions": AgentVersion.objects.filter(agent_name=pointer.agent_name)[:50],
            "publish_requests": PublishRequest.objects.filter(
                version__agent_name=pointer.agent_name
            ).select_related("version")[:10],
            "runs": ReplayRun.objects.filter(version__agent_name=pointer.agent_name).select_related(
                "version"
            )[:20],
        }
        return TemplateResponse(request, self.change_form_template, context)

    def _label(self, version: AgentVersion | None, pointer: AgentPointer) -> str:
        return f"{version} (published)" if version else f"{pointer.agent_name} (code)"

    def _act(self, request: HttpRequest, pointer: AgentPointer, action: str) -> Any:
        try:
            if action == "publish":
                if pointer.draft is None:
                    raise services.VersionConflict("There is no draft to publish.")
                run_id = request.POST.get("replay_run", "")
                run = (
                    ReplayRun.objects.filter(pk=int(run_id), version=pointer.draft).first()
                    if run_id.isdigit() and len(run_id) < 19
                    else None
                )
                if pointer.publish_needs_approval:
                    asked = publish_request(version=pointer.draft, by=request.user, replay_run=run)
                    messages.success(
                        request,
                        format_html(
                            'Publishing {} waits for an approval: <a href="{}">decide it in '
                            "/approvals/</a>.",
                            pointer.draft,
                            reverse("approval-detail", args=[asked.approval_id]),
                        ),
                    )
                    return HttpResponseRedirect(request.path)
                services.version_publish(
                    version=pointer.draft,
                    by=request.user,
                    expected_published_id=_shown_published(request),
                    replay_run=run,
                )
                messages.success(
                    request, f"{pointer.draft} is published: the next turn runs on it."
                )
            elif action == "rollback":
                services.version_rollback(agent_name=pointer.agent_name, by=request.user)
                messages.success(request, "Rolled back: the next turn runs on the version before.")
            else:
                return None
        except services.VersionConflict as error:
            messages.error(request, str(error))
        return HttpResponseRedirect(request.path)

    def _replay(self, request: HttpRequest, pointer: AgentPointer, form: ReplayForm) -> Any:
        if pointer.draft is None:
            form.add_error(None, "Write a draft first: a replay runs the draft.")
            return None
        if not form.is_valid():
            return None
        data = form.cleaned_data
        try:
            if data["ids"]:
                ids, selection = parse_ids(data["ids"]), "ids"
            elif data["filter"]:
                ids = sessions_from_admin_filter(data["filter"], user=request.user)
                selection = f"filter ?{data['filter'].lstrip('?')}"
            else:
                size = data["sample"] or REPLAY_SAMPLE
                ids, selection = sample_sessions(pointer.agent_name, size), f"sample of {size}"
            run = replay_run_start(
                version=pointer.draft,
                session_ids=ids,
                selection=selection,
                by=request.user,
                unseen_tools=data["unseen_tools"] or "mark",
            )
        except (ValueError, SelectionInvalid) as error:
            form.add_error(None, str(error))
            return None
        messages.success(request, f"Replay run {run.pk} started on {run.total} conversations.")
        return HttpResponseRedirect(reverse("admin:versions_replayrun_change", args=[run.pk]))


@admin.register(AgentVersion)
class AgentVersionAdmin(ScaleAdmin):
    """Versions are immutable: read here, written by the agent page's draft form."""

    list_display = ("__str__", "agent_name", "number", "author", "note", "created_at")
    list_filter = (AgentFilter,)
    list_select_related = ("author",)
    ordering = ("-id",)
    sortable_by = ("id",)
    readonly_fields = [field.name for field in AgentVersion._meta.fields] + ["diff"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="against the published version")
    def diff(self, version: AgentVersion) -> Any:
        from django.utils.html import format_html_join

        pointer = (
            AgentPointer.objects.select_related("published").filter(pk=version.agent_name).first()
        )
        published = pointer.published if pointer else None
        lines = version_diff(published, version)
        if not lines:
            return "identical"
        return format_html_join(
            "", '<div class="diff diff--{}">{}</div>', ((_kind(line), line) for line in lines)
        )


def _shown_published(request: HttpRequest) -> Any:
    """The published version the page showed (its publish is refused if it moved since)."""
    if "published" not in request.POST:
        return services.UNCHECKED
    shown = request.POST["published"]
    return int(shown) if shown.isdigit() else None


def _kind(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "file"
    return {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "same")


class ReplayResultInline(admin.TabularInline):
    model = ReplayResult
    extra = 0
    can_delete = False
    fields = ("session", "diverged", "divergence", "unrecorded_calls", "checks_failed", "error")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ReplayRun)
class ReplayRunAdmin(ScaleAdmin):
    list_display = (
        "id",
        "version",
        "selection",
        "status",
        "progress",
        "diverged",
        "failed_checks",
        "created_at",
    )
    list_select_related = ("version",)
    ordering = ("-id",)
    sortable_by = ("id",)
    change_form_template = "admin/versions/report.html"
    actions = ["resume"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # started from the agent's page

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a run is data; its page is its report

    @admin.display(description="progress")
    def progress(self, run: ReplayRun) -> str:
        return f"{run.done}/{run.total}"

    @admin.action(description="Resume the selected runs (a worker stopped)")
    def resume(self, request: HttpRequest, queryset: Any) -> None:
        from gloveapp.versions.tasks import replay_run_enqueue

        count = 0
        for run in queryset.exclude(status__in=[ReplayRun.Status.DONE, ReplayRun.Status.FAILED]):
            replay_run_enqueue(run.pk)
            count += 1
        self.message_user(request, f"{count} run(s) queued again.")

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> Any:
        run = get_object_or_404(
            ReplayRun.objects.select_related("version"),
            pk=int(object_id) if object_id.isdigit() and len(object_id) < 19 else 0,
        )
        if not self.has_view_permission(request, run):
            raise PermissionDenied
        only = request.GET.get("show", "diverged")
        results = ReplayResult.objects.filter(run=run).select_related("session")
        if only == "diverged":
            results = results.filter(diverged=True)
        elif only == "failed":
            results = results.filter(checks_failed__gt=0)
        after = request.GET.get("after", "")
        if after.isdigit() and len(after) < 19:
            results = results.filter(pk__gt=int(after))
        page = list(results.order_by("pk")[:50])
        for result in page:
            result.judge_dollars = _dollars(result.judge_cost)  # type: ignore[attr-defined]
            for turn in result.turns:
                turn["sides"] = [turn["recorded"], turn["replayed"]]
        context = {
            **self.admin_site.each_context(request),
            "title": f"Replay run {run.pk}: {run.version}",
            "opts": self.model._meta,
            "run": run,
            "results": page,
            "show": only,
            "next_after": page[-1].pk if len(page) == 50 else None,
            "running": run.status in (ReplayRun.Status.QUEUED, ReplayRun.Status.RUNNING),
            "identical": run.done - run.diverged,
            "judge_dollars": _dollars(run.judge_cost),
        }
        return TemplateResponse(request, self.change_form_template, context)


def _dollars(amount: Any) -> str:
    """A cost as people read it: $0.0008, not $0.00080000 (empty: unknown)."""
    return "" if amount is None else f"{amount.normalize():f}"
