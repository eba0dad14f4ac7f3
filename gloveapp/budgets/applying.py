"""Which budgets apply to a model call or a turn: who it is for, and the rules that count it.

The settings' rules are parsed once per value of the setting, and an agent version's come
with the subject. The admin's (`Budget` rows) are read from the database: afresh for a
turn's start (`applicable`), and for a model call on PostgreSQL from this process's cache
(`call_rules`), which the reservation statement itself checks. Every statement that changes
the budgets table (an admin save, a bulk update, raw SQL, TRUNCATE) sets the rules'
generation, a one-row table, to its own transaction's id, in that transaction (a
statement-level trigger: migration 0003). A cached entry keeps the generation it was read
at; the reservation passes it in and writes nothing when the table holds another, and the
call is then checked again with the rules read anew (a read that finds a new generation
drops the other subjects' entries: their next calls read them). A budget added or changed
mid-turn applies from the next call, as when every call read them.

A transaction's id is never reused, so a generation is never seen twice: a change rolled
back, or the table emptied (tests flush it), cannot bring back a value a stale entry holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Q

from gloveapp.budgets.models import Budget
from gloveapp.budgets.rules import Rule, Subject, settings_rules
from gloveapp.lib.db.prepared import prepared_cursor

# The one-row table the budgets table's trigger keeps (PostgreSQL only).
GENERATION_TABLE = "budgets_rules_generation"
# Subjects whose admin rules this process keeps (a subject is an agent in a session for a
# user: a turn's calls share one); cleared whole when full.
CACHE_MAX = 10_000


def subject_for(
    *,
    user_id: int | None,
    agent: str,
    session_id: str,
    turn_id: int | None = None,
    version_rules: tuple[Rule, ...] = (),
) -> Subject:
    """The call's subject: the user's name and groups read once (a turn keeps it), and the
    budgets of the agent version it runs on."""
    username, groups = "", []
    if user_id is not None:
        rows = list(
            get_user_model()
            .objects.filter(pk=user_id)
            .values_list(get_user_model().USERNAME_FIELD, "groups__name")
        )
        if rows:
            username = rows[0][0]
            groups = sorted({name for _, name in rows if name})
        else:
            user_id = None
    return Subject(
        user_id=user_id,
        username=username,
        groups=tuple(groups),
        agent=agent,
        session_id=session_id,
        turn_id=turn_id,
        version_rules=version_rules,
    )


def rules_in_settings() -> tuple[Rule, ...]:
    return settings_rules(settings.GLOVE_BUDGETS, settings.GLOVE_TURNS_PER_USER_PER_MINUTE)


@dataclass(frozen=True, slots=True)
class AdminRules:
    """The admin's budgets that may apply to a subject, as read at `generation` (None: not
    known, SQLite or a table emptied by hand: nothing to check against, never cached)."""

    rules: tuple[Rule, ...]
    generation: int | None
    fresh: bool  # read by this call, not taken from the cache


_BUDGETS = Budget._meta.db_table
_RULE_COLUMNS = 'key, scope, "window", target, cap_usd, cap_tokens, cap_turns, action, name'
# PostgreSQL: the budgets that apply and the generation, in one snapshot (one statement of a
# fixed text, prepared once per connection): a probe of `budget_applies_idx` per scope. One
# row at least, whose budget columns are null when none applies.
_RULES_SQL = f"""
    SELECT (SELECT generation FROM {GENERATION_TABLE} WHERE id = 1), b.*
      FROM (SELECT 1) AS one LEFT JOIN LATERAL (
        SELECT {_RULE_COLUMNS} FROM {_BUDGETS}
         WHERE active AND (scope = 'everyone'
            OR (scope = 'agent' AND target = ANY(%(agents)s))
            OR (scope = 'session' AND target = ANY(%(sessions)s))
            OR (scope = 'user' AND target = ANY(%(users)s))
            OR (scope = 'group' AND target = ANY(%(groups)s)))
      ) AS b ON true
"""
GENERATION_SQL = f"SELECT generation FROM {GENERATION_TABLE} WHERE id = 1"

_cache: dict[tuple[Any, ...], AdminRules] = {}
# The generation the last read found: an entry of any other is out of date.
_last_read: int | None = None


def _cache_key(subject: Subject) -> tuple[Any, ...]:
    if subject.user_id is None:
        return (subject.agent, subject.session_id, None, ())
    return (subject.agent, subject.session_id, subject.username, subject.groups)


def admin_rules_read(subject: Subject) -> AdminRules:
    """The admin's budgets that may apply to the subject, read now (and cached, on
    PostgreSQL)."""
    global _last_read
    if connection.vendor != "postgresql":
        return AdminRules(tuple(_admin_rules_orm(subject)), None, fresh=True)
    user = subject.user_id is not None
    with prepared_cursor() as cursor:
        cursor.execute(
            _RULES_SQL,
            {
                "agents": [subject.agent, ""],
                "sessions": [subject.session_id, ""],
                "users": [subject.username, ""] if user else [],
                "groups": [*subject.groups, ""] if user else [],
            },
        )
        rows = cursor.fetchall()
    found = AdminRules(
        tuple(_rule_of(row[1:]) for row in rows if row[1] is not None), rows[0][0], fresh=True
    )
    key = _cache_key(subject)
    if found.generation is None:
        _cache.pop(key, None)  # nothing to check an entry against: read at every call
        return found
    if found.generation != _last_read or len(_cache) >= CACHE_MAX:
        # The budgets changed: the other subjects' entries are read again at their next
        # call, rather than each found out of date by a reservation that writes nothing.
        _cache.clear()
        _last_read = found.generation
    _cache[key] = AdminRules(found.rules, found.generation, fresh=False)
    return found


def call_rules(subject: Subject) -> AdminRules:
    """The admin's budgets for a model call: this process's cached entry, to be checked
    against the generation by the statement that uses it, else read now."""
    if connection.vendor == "postgresql":
        cached = _cache.get(_cache_key(subject))
        if cached is not None:
            return cached
    return admin_rules_read(subject)


def generation_now() -> int | None:
    """The rules' generation now (PostgreSQL): what a call with no budget checks its cached
    entry against."""
    with prepared_cursor() as cursor:
        cursor.execute(GENERATION_SQL)
        row = cursor.fetchone()
    return None if row is None else row[0]


def _admin_rules_orm(subject: Subject) -> list[Rule]:
    wanted = (
        Q(scope="everyone")
        | Q(scope="agent", target__in=[subject.agent, ""])
        | Q(scope="session", target__in=[subject.session_id, ""])
    )
    if subject.user_id is not None:
        wanted |= Q(scope="user", target__in=[subject.username, ""])
        wanted |= Q(scope="group", target__in=[*subject.groups, ""])
    rows = Budget.objects.filter(wanted, active=True).values_list(
        "key",
        "scope",
        "window",
        "target",
        "cap_usd",
        "cap_tokens",
        "cap_turns",
        "action",
        "name",
    )
    return [_rule_of(row) for row in rows]


def _rule_of(row: Any) -> Rule:
    key, scope, window, target, cap_usd, cap_tokens, cap_turns, action, name = row
    return Rule(
        key=key,
        scope=scope,
        window=window,
        target=target,
        cap_usd=cap_usd,
        cap_tokens=cap_tokens,
        cap_turns=cap_turns,
        action=action,
        name=name,
        source="admin",
    )


def applicable(subject: Subject, admin: AdminRules | None = None) -> list[tuple[Rule, str]]:
    """Every (budget, subject part) the subject's calls count under: the settings', the
    admin's (`admin`, else read now) and its agent version's."""
    admin_rules = (admin or admin_rules_read(subject)).rules
    found: list[tuple[Rule, str]] = []
    for rule in (*rules_in_settings(), *admin_rules, *subject.version_rules):
        found.extend((rule, part) for part in subject.subjects(rule))
    return found
