"""System check glove.E060: GLOVE_BUDGETS declares budgets Glove can keep."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register

from gloveapp.budgets.rules import RuleInvalid, parse_rules


@register()
def budgets_declared(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    try:
        parse_rules(settings.GLOVE_BUDGETS)
    except RuleInvalid as error:
        return [
            Error(
                str(error),
                hint="See docs/howto/budgets.md for the form of a budget.",
                id="glove.E060",
            )
        ]
    return []
