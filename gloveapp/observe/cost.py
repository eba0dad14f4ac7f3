"""What model calls cost: a price table (per million tokens) applied to stored token usage.

    prices = parse_prices({"claude-sonnet-4-5": {"input": 3, "output": 15,
                                                 "cache_read": 0.3, "cache_write": 3.75}})
    cost = total_cost([("claude-sonnet-4-5", Usage(tokens_in=1200, tokens_out=300))], prices)
    cost.amount        # Decimal("0.0081"), or None when no call could be priced
    cost.unknown       # the models without a price: their share is unknown, never 0

A model is looked up by the name its adapter reports (`claude-sonnet-4-5`), then by the
`provider:model` spec it was configured with. Django-free: the settings give the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

PRICE_FIELDS = ("input", "output", "cache_read", "cache_write")
MILLION = Decimal(1_000_000)
# Costs are shown to the millionth of a dollar.
QUANTUM = Decimal("0.000001")


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens."""

    input: Decimal
    output: Decimal
    cache_read: Decimal = Decimal(0)
    cache_write: Decimal = Decimal(0)


@dataclass(slots=True)
class Usage:
    tokens_in: int = 0
    tokens_out: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.tokens_in + other.tokens_in,
            self.tokens_out + other.tokens_out,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
        )

    @property
    def empty(self) -> bool:
        return not (self.tokens_in or self.tokens_out or self.cache_read or self.cache_write)


@dataclass(slots=True)
class Cost:
    """A total: `amount` over the priced models (None when none was), `unknown` the models
    used without a price (their part of the cost is unknown)."""

    amount: Decimal | None = None
    unknown: tuple[str, ...] = ()
    by_model: dict[str, Decimal | None] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not self.unknown

    def text(self) -> str:
        """How people read it: "$0.012345", "unknown (no price for x)", or both."""
        missing = f"no price for {', '.join(self.unknown)}" if self.unknown else ""
        if self.amount is None:
            return f"unknown ({missing})" if missing else "$0.000000"
        shown = f"${self.amount.quantize(QUANTUM)}"
        return f"{shown} + unknown ({missing})" if missing else shown

    def as_dict(self) -> dict[str, Any]:
        """The REST shape: dollars as a string (exact), null when no model used had a price
        ("0.000000" when nothing was used)."""
        return {
            "usd": (
                str(self.amount.quantize(QUANTUM))
                if self.amount is not None
                else (None if self.unknown else "0.000000")
            ),
            "complete": self.complete,
            "unknown_models": list(self.unknown),
            "by_model": {
                model: (str(part.quantize(QUANTUM)) if part is not None else None)
                for model, part in self.by_model.items()
            },
        }


def parse_prices(raw: Mapping[str, Any]) -> dict[str, Price]:
    """The price table from its settings form; ValueError names the model and field."""
    table: dict[str, Price] = {}
    if not isinstance(raw, Mapping):
        raise ValueError("the price table must map model names to prices")
    for model, entry in raw.items():
        if not isinstance(entry, Mapping):
            raise ValueError(f"{model}: a price is an object with {', '.join(PRICE_FIELDS)}")
        extra = set(entry) - set(PRICE_FIELDS)
        if extra:
            raise ValueError(f"{model}: unknown field {sorted(extra)[0]!r}")
        values = {}
        for name in PRICE_FIELDS:
            value = entry.get(name, 0 if name.startswith("cache") else None)
            if value is None:
                raise ValueError(f"{model}: {name} is required")
            try:
                number = Decimal(str(value))
            except InvalidOperation:
                raise ValueError(f"{model}: {name} must be a number") from None
            if not number.is_finite() or number < 0:
                raise ValueError(f"{model}: {name} must be a number of at least 0")
            values[name] = number
        table[str(model)] = Price(**values)
    return table


def price_for(model: str, prices: Mapping[str, Price]) -> Price | None:
    if model in prices:
        return prices[model]
    # "anthropic:claude-sonnet-4-5" configured, "claude-sonnet-4-5" reported (or the reverse).
    bare = model.partition(":")[2]
    if bare and bare in prices:
        return prices[bare]
    for key, price in prices.items():
        if key.partition(":")[2] == model:
            return price
    return None


def cost_of(usage: Usage, price: Price) -> Decimal:
    return (
        usage.tokens_in * price.input
        + usage.tokens_out * price.output
        + usage.cache_read * price.cache_read
        + usage.cache_write * price.cache_write
    ) / MILLION


def total_cost(rows: Iterable[tuple[str, Usage]], prices: Mapping[str, Price]) -> Cost:
    """The cost of (model, usage) rows; a model without a price is named, never free."""
    amount: Decimal | None = None
    unknown: list[str] = []
    by_model: dict[str, Decimal | None] = {}
    for model, usage in rows:
        if usage.empty:
            continue
        price = price_for(model, prices)
        if price is None:
            if model not in unknown:
                unknown.append(model or "(no model recorded)")
            by_model[model] = None
            continue
        part = cost_of(usage, price)
        amount = part if amount is None else amount + part
        by_model[model] = (by_model.get(model) or Decimal(0)) + part
    return Cost(amount=amount, unknown=tuple(unknown), by_model=by_model)
