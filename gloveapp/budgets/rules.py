"""What a budget says, whichever declared it: the admin's `Budget` rows and `GLOVE_BUDGETS`.

    GLOVE_BUDGETS = [
        {"id": "daily-per-user", "scope": "user", "window": "day", "cap_usd": "1.00",
         "action": "refuse"},
        {"id": "support-agent-month", "scope": "agent", "target": "support",
         "window": "month", "cap_usd": "200", "cap_tokens": 50000000, "action": "warn"},
    ]

A rule applies to a call by its scope: a user's own (`target` their username, or empty:
each user apart), a group's (each group of the user, or the named one), an agent's, a
session's, or everyone's. An agent version's budgets (`version_rules`) are rules of that
agent alone: `{"id": "daily", "scope": "user", ...}` in coffee's version counts each user's
calls to coffee, as the budget `coffee/daily`, whichever version of coffee runs. Its window is a calendar minute, day or month (UTC), or the turn.
A minute's cap on turns holds over any 60 s (a rolling counter), not per calendar minute.
The per-user turns per minute (GLOVE_TURNS_PER_USER_PER_MINUTE) is the rule
`turns-per-minute`, always there when the setting is above 0.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

SCOPES = ("user", "group", "agent", "session", "everyone")
WINDOWS = ("minute", "turn", "day", "month")
ACTIONS = ("warn", "require_person", "refuse")
TURNS_PER_MINUTE = "turns-per-minute"
FIELDS = {"id", "name", "scope", "target", "window", "cap_usd", "cap_tokens", "cap_turns"}
FIELDS |= {"action"}
KEY_LENGTH = 100
TARGET_LENGTH = 200


@dataclass(frozen=True, slots=True)
class Rule:
    """One budget. `cap_usd` in US dollars (GLOVE_MODEL_PRICES' currency); None: no cap of
    that kind. `source`: "admin" (a `Budget` row), "settings" or "version" (an agent
    version's, `agent`)."""

    key: str
    scope: str
    window: str
    target: str = ""
    cap_usd: Decimal | None = None
    cap_tokens: int | None = None
    cap_turns: int | None = None
    action: str = "refuse"
    name: str = ""
    source: str = "settings"
    # An agent version's budget (source "version"): it counts this agent's calls only.
    agent: str = ""

    @property
    def blocks(self) -> bool:
        return self.action != "warn"

    @property
    def title(self) -> str:
        return self.name or self.key

    @property
    def counts_calls(self) -> bool:
        return self.cap_usd is not None or self.cap_tokens is not None

    @property
    def counts_turns(self) -> bool:
        # A turn's own window holds one turn: a cap of turns means nothing there.
        return self.cap_turns is not None and self.window != "turn"


@dataclass(frozen=True, slots=True)
class Subject:
    """Who a call is for: what the rules' scopes are matched against."""

    user_id: int | None
    username: str
    groups: tuple[str, ...]
    agent: str
    session_id: str
    turn_id: int | None = None
    # The budgets of the agent version the call runs on (`version_rules`).
    version_rules: tuple[Rule, ...] = ()

    def subjects(self, rule: Rule) -> list[str]:
        """The counters' subject parts this rule counts the call under (none: it does not
        apply). Each group of the user's is one, when the rule is for each group."""
        if rule.agent and rule.agent != self.agent:
            return []
        if rule.scope == "everyone":
            return ["*"]
        if rule.scope == "user":
            if self.user_id is None or rule.target not in ("", self.username):
                return []
            return [f"u:{self.user_id}"]
        if rule.scope == "group":
            if self.user_id is None:
                return []
            groups = (
                self.groups
                if not rule.target
                else ((rule.target,) if rule.target in self.groups else ())
            )
            return [f"g:{name}" for name in groups]
        if rule.scope == "agent":
            return [f"a:{self.agent}"] if rule.target in ("", self.agent) else []
        if rule.scope == "session":
            return [f"s:{self.session_id}"] if rule.target in ("", self.session_id) else []
        return []


def window_of(rule: Rule, now: datetime, turn_id: int | None) -> tuple[str, datetime | None]:
    """The window's name and its end (None: a turn's window, which ends with the turn)."""
    now = now.astimezone(UTC)
    if rule.window == "minute":
        start = now.replace(second=0, microsecond=0)
        return f"m:{start:%Y-%m-%dT%H:%M}", start + timedelta(minutes=1)
    if rule.window == "day":
        start = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return f"d:{start:%Y-%m-%d}", start + timedelta(days=1)
    if rule.window == "month":
        start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        following = (start + timedelta(days=32)).replace(day=1)
        return f"M:{start:%Y-%m}", following
    return f"t:{turn_id or 0}", None


class RuleInvalid(ValueError):
    """A budget declared wrongly: `field` names the input at fault."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


def _money(value: Any, field: str) -> Decimal | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise RuleInvalid(f"{field} must be a number of dollars", field=field)
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        raise RuleInvalid(f"{field} must be a number of dollars", field=field) from None
    if not number.is_finite() or number < 0 or number >= Decimal(10) ** 12:
        raise RuleInvalid(f"{field} must be between 0 and 10^12 dollars", field=field)
    return number


def _count(value: Any, field: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**62:
        raise RuleInvalid(f"{field} must be a whole number of at least 0", field=field)
    return value


def rule_from_dict(raw: Any, *, source: str = "settings") -> Rule:
    """A rule from its settings form; RuleInvalid names the field at fault."""
    if not isinstance(raw, dict):
        raise RuleInvalid("a budget is an object", field="budget")
    extra = set(raw) - FIELDS
    if extra:
        raise RuleInvalid(f"unknown field {sorted(extra)[0]!r}", field=sorted(extra)[0])
    key = raw.get("id")
    if not isinstance(key, str) or not key or len(key) > KEY_LENGTH or not key.isascii():
        raise RuleInvalid(f"id must be ASCII text of 1 to {KEY_LENGTH} characters", field="id")
    if not all(char.isalnum() or char in "-_" for char in key):
        raise RuleInvalid("id takes letters, digits, - and _ only", field="id")
    for name, choices in (("scope", SCOPES), ("window", WINDOWS), ("action", ACTIONS)):
        value = raw.get(name, "refuse" if name == "action" else None)
        if value not in choices:
            raise RuleInvalid(f"{name} must be one of {', '.join(choices)}", field=name)
    target = raw.get("target") or ""
    if not isinstance(target, str) or len(target) > TARGET_LENGTH:
        raise RuleInvalid(f"target must be text of at most {TARGET_LENGTH}", field="target")
    if raw["scope"] == "everyone" and target:
        raise RuleInvalid("a budget for everyone has no target", field="target")
    name = raw.get("name") or ""
    if not isinstance(name, str) or len(name) > 200:
        raise RuleInvalid("name must be text of at most 200 characters", field="name")
    rule = Rule(
        key=key,
        scope=raw["scope"],
        window=raw["window"],
        target=target,
        cap_usd=_money(raw.get("cap_usd"), "cap_usd"),
        cap_tokens=_count(raw.get("cap_tokens"), "cap_tokens"),
        cap_turns=_count(raw.get("cap_turns"), "cap_turns"),
        action=raw.get("action", "refuse"),
        name=name,
        source=source,
    )
    if rule.cap_usd is None and rule.cap_tokens is None and rule.cap_turns is None:
        raise RuleInvalid("a budget needs cap_usd, cap_tokens or cap_turns", field="cap_usd")
    return rule


_parsed: tuple[Any, tuple[Rule, ...]] | None = None


def parse_rules(raw: Any) -> tuple[Rule, ...]:
    """GLOVE_BUDGETS (a list, or its JSON text) as rules; RuleInvalid on the first fault,
    naming the budget's place."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else []
        except ValueError:
            raise RuleInvalid("GLOVE_BUDGETS must be a JSON list", field="GLOVE_BUDGETS") from None
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise RuleInvalid("GLOVE_BUDGETS must be a list of budgets", field="GLOVE_BUDGETS")
    rules: list[Rule] = []
    seen: set[str] = set()
    for index, entry in enumerate(raw):
        try:
            rule = rule_from_dict(entry)
        except RuleInvalid as error:
            raise RuleInvalid(f"GLOVE_BUDGETS[{index}]: {error}", field=error.field) from None
        if rule.key in seen or rule.key == TURNS_PER_MINUTE:
            raise RuleInvalid(f"GLOVE_BUDGETS[{index}]: id {rule.key} is taken", field="id")
        seen.add(rule.key)
        rules.append(rule)
    return tuple(rules)


def version_rules(agent: str, raw: Any) -> tuple[Rule, ...]:
    """An agent version's `budgets` (a list in GLOVE_BUDGETS' form) as rules of that agent:
    each one's key is `agent/id`, so its counters carry on from version to version, and
    an agent-scoped one is the agent's own (its target, when given, must be the agent).
    RuleInvalid names the budget's place, as `budgets[0]`."""
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise RuleInvalid("budgets must be a list of budgets", field="budgets")
    rules: list[Rule] = []
    seen: set[str] = set()
    for index, entry in enumerate(raw):
        where = f"budgets[{index}]"
        try:
            rule = rule_from_dict(entry, source="version")
        except RuleInvalid as error:
            raise RuleInvalid(f"{where}: {error}", field=f"{where}.{error.field}") from None
        key = f"{agent}/{rule.key}"
        if len(key) > KEY_LENGTH:
            raise RuleInvalid(
                f"{where}: id is too long ({key!r} is over {KEY_LENGTH} characters)",
                field=f"{where}.id",
            )
        if rule.key in seen:
            raise RuleInvalid(f"{where}: id {rule.key} is taken", field=f"{where}.id")
        target = rule.target
        if rule.scope == "agent":
            if target not in ("", agent):
                raise RuleInvalid(
                    f"{where}: a version's agent budget is its own agent's ({agent})",
                    field=f"{where}.target",
                )
            target = agent
        seen.add(rule.key)
        rules.append(dataclasses.replace(rule, key=key, target=target, agent=agent))
    return tuple(rules)


def settings_rules(raw: Any, turns_per_minute: int) -> tuple[Rule, ...]:
    """The budgets the settings declare, the turns-per-minute one first (parsed once per
    value of the setting: tests and `override_settings` change it)."""
    global _parsed
    if _parsed is None or _parsed[0] != (raw, turns_per_minute):
        marker = (copy.deepcopy(raw), turns_per_minute)
        rules = list(parse_rules(raw))
        if turns_per_minute and turns_per_minute > 0:
            rules.insert(
                0,
                Rule(
                    key=TURNS_PER_MINUTE,
                    name="Turns per user per minute (GLOVE_TURNS_PER_USER_PER_MINUTE)",
                    scope="user",
                    window="minute",
                    cap_turns=int(turns_per_minute),
                    action="refuse",
                ),
            )
        _parsed = (marker, tuple(rules))
    return _parsed[1]


def tightest(found: Iterable[tuple[Rule, Decimal]]) -> Rule | None:
    """Of (rule, share of its cap left) pairs, the rule with the least left."""
    ranked = sorted(found, key=lambda pair: pair[1])
    return ranked[0][0] if ranked else None
