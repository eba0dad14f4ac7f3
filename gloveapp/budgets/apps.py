from __future__ import annotations

from django.apps import AppConfig


class BudgetsConfig(AppConfig):
    """Spending limits: budgets, their per-window counters and the reservation ledger."""

    name = "gloveapp.budgets"
    label = "budgets"
    verbose_name = "Budgets"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from gloveapp.budgets import checks  # noqa: F401  (registers the system checks)
