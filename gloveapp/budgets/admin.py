"""Budgets in the admin: staff declare them; counters and the ledger are read only."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from gloveapp.budgets.applying import rules_in_settings
from gloveapp.budgets.models import Budget, BudgetCounter, BudgetReservation
from gloveapp.lib.admin import ExactValueFilter, ScaleAdmin


class BudgetForm(forms.ModelForm):
    class Meta:
        model = Budget
        fields = (
            "key",
            "name",
            "scope",
            "target",
            "window",
            "cap_usd",
            "cap_tokens",
            "cap_turns",
            "action",
            "active",
        )

    def clean_key(self) -> str:
        key = self.cleaned_data["key"]
        if key in {rule.key for rule in rules_in_settings()}:
            raise forms.ValidationError("The settings (GLOVE_BUDGETS) declare a budget of this id.")
        return key

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("scope") == Budget.Scope.EVERYONE and data.get("target"):
            self.add_error("target", "A budget for everyone has no target.")
        caps = [data.get(name) for name in ("cap_usd", "cap_tokens", "cap_turns")]
        if all(cap is None for cap in caps):
            self.add_error("cap_usd", "Give the budget a cap: dollars, tokens or turns.")
        for name in ("cap_usd", "cap_tokens", "cap_turns"):
            value = data.get(name)
            if value is not None and value < 0:
                self.add_error(name, "A cap is at least 0.")
        return data


@admin.register(Budget)
class BudgetAdmin(ScaleAdmin):
    form = BudgetForm
    list_display = ("key", "name", "scope", "target", "window", "cap_usd", "cap_tokens")
    list_display += ("cap_turns", "action", "active")
    ordering = ("key",)
    sortable_by = ("key",)
    list_filter = ("scope", "window", "action", "active")
    search_exact = ("key", "target")
    search_help_text = "An exact budget id, or an exact target (username, group, agent, session)."


class _ReadOnly(ScaleAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class BudgetKeyFilter(ExactValueFilter):
    title = "budget id"
    parameter_name = "budget"
    field = "budget_key"
    placeholder = "an exact budget id"


@admin.register(BudgetCounter)
class BudgetCounterAdmin(_ReadOnly):
    list_display = ("budget_key", "window_key", "spent_usd", "reserved_usd", "spent_tokens")
    list_display += ("reserved_tokens", "turns", "ends_at", "warned_at")
    ordering = ("-id",)
    sortable_by = ()
    list_filter = (BudgetKeyFilter,)


class TurnIdFilter(ExactValueFilter):
    title = "turn"
    parameter_name = "turn"
    field = "turn_id"
    placeholder = "a turn's number"

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        value = (self.value() or "").strip()
        if value and not (value.isascii() and value.isdigit() and len(value) <= 18):
            return queryset.none()
        return super().queryset(request, queryset)


@admin.register(BudgetReservation)
class BudgetReservationAdmin(_ReadOnly):
    list_display = ("id", "budget_key", "window_key", "turn_id", "attempt", "model", "state")
    list_display += ("reserved_usd", "settled_usd", "created_at", "settled_at")
    ordering = ("-created_at", "-id")
    sortable_by = ()
    list_filter = ("state", BudgetKeyFilter, TurnIdFilter)
