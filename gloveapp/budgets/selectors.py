"""What budgets have spent in their current windows: the usage page and `/metrics`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db.models import Count, F, Max, Sum
from django.utils import timezone

from gloveapp.budgets.applying import rules_in_settings
from gloveapp.budgets.models import Budget, BudgetCounter
from gloveapp.budgets.rules import Rule

ZERO = Decimal(0)
# Budgets on one screen of the usage page.
PAGE = 50


@dataclass(frozen=True, slots=True)
class Spend:
    """A budget's use in its current window, over its subjects (each user of a per-user
    budget): dollars settled and reserved, the most any one subject used, tokens, turns."""

    rule: Rule
    spent_usd: Decimal = ZERO
    reserved_usd: Decimal = ZERO
    top_usd: Decimal = ZERO
    tokens: int = 0
    turns: int = 0
    subjects: int = 0

    @property
    def remaining_usd(self) -> Decimal | None:
        """The cap less the most any subject used (one subject: its own), never below 0."""
        if self.rule.cap_usd is None:
            return None
        return max(self.rule.cap_usd - self.top_usd, ZERO)

    @property
    def used_usd(self) -> Decimal:
        return self.spent_usd + self.reserved_usd


def _rule(row: Budget) -> Rule:
    return Rule(
        key=row.key,
        scope=row.scope,
        window=row.window,
        target=row.target,
        cap_usd=row.cap_usd,
        cap_tokens=row.cap_tokens,
        cap_turns=row.cap_turns,
        action=row.action,
        name=row.name,
        source="admin",
    )


def _spend(rules: list[Rule], now: datetime) -> list[Spend]:
    """One grouped read of the rules' open windows (a turn's window is its turn's alone:
    not summed here)."""
    if not rules:
        return []
    rows = (
        BudgetCounter.objects.filter(budget_key__in=[rule.key for rule in rules], ends_at__gt=now)
        .values("budget_key")
        .annotate(
            spent=Sum("spent_usd"),
            reserved=Sum("reserved_usd"),
            top=Max(F("spent_usd") + F("reserved_usd")),
            tokens=Sum(F("spent_tokens") + F("reserved_tokens")),
            turns=Sum("turns"),
            subjects=Count("id"),
        )
        .order_by()
    )
    found = {row["budget_key"]: row for row in rows}
    spends = []
    for rule in rules:
        row = found.get(rule.key)
        if row is None:
            spends.append(Spend(rule))
            continue
        spends.append(
            Spend(
                rule,
                spent_usd=Decimal(row["spent"] or 0),
                reserved_usd=Decimal(row["reserved"] or 0),
                top_usd=Decimal(row["top"] or 0),
                tokens=int(row["tokens"] or 0),
                turns=int(row["turns"] or 0),
                subjects=row["subjects"],
            )
        )
    return spends


def budgets_spend_page(
    *, after: str = "", limit: int = PAGE, versions: Sequence[Rule] = ()
) -> tuple[list[Spend], str | None]:
    """A page of budgets by key with their spend (the settings' and the published agent
    versions' `versions` first, on the first page); the key to ask the next page after, or
    None at the end."""
    now = timezone.now()
    rules = [*rules_in_settings(), *versions] if not after else []
    rows = Budget.objects.order_by("key")
    if after:
        rows = rows.filter(key__gt=after)
    page = list(rows[: limit + 1])
    following = page[limit - 1].key if len(page) > limit else None
    rules += [_rule(row) for row in page[:limit]]
    return _spend(rules, now), following


def budgets_spend_all(*, versions: Sequence[Rule] = ()) -> list[Spend]:
    """Every budget's spend (`/metrics`: one series per budget id, no user in a label),
    the published agent versions' `versions` among them."""
    now = timezone.now()
    rules = [*rules_in_settings(), *versions]
    rules += [_rule(row) for row in Budget.objects.order_by("key")]
    return _spend(rules, now)
