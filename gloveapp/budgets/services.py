"""Every change to budgets' counters and ledger: reserve, settle, release, admit a turn.

A model call reserves its worst case against every budget that applies to it before it is
made (`budget_reserve`): the counters of those budgets' current windows are locked (one
`SELECT ... ORDER BY id FOR UPDATE`, so two calls lock in the same order and never
deadlock), each blocking budget's cap is checked against what is settled plus what calls in
flight reserved, and all of them gain the reservation in the same transaction, or none
does. A second call waits for the first's commit and then sees its reservation: a hundred
at once cannot together pass a cap. When the call returns, `budget_settle` moves its
reservation to the actual cost; a call that failed is released; a reservation whose worker
died is settled at its reserved maximum by whoever takes the turn back
(`budget_reservations_close`): the call may have been billed, and nobody knows its usage.

A turn's start is admitted by `budget_admit_turn`: it counts the turn against the budgets
with a cap of turns (the per-user turns per minute among them), exactly, under the same
locks; a refusing budget whose money or tokens are spent for the window refuses the turn
there, before it is queued.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from gloveapp.budgets.applying import (
    GENERATION_TABLE,
    AdminRules,
    admin_rules_read,
    applicable,
    call_rules,
    generation_now,
)
from gloveapp.budgets.models import BudgetCounter, BudgetReservation
from gloveapp.budgets.rules import Rule, Subject, window_of
from gloveapp.core.types import InboxItem as CoreInboxItem
from gloveapp.lib.db.batches import delete_in_batches
from gloveapp.lib.db.prepared import prepared_cursor
from gloveapp.observe import metrics

logger = logging.getLogger(__name__)
State = BudgetReservation.State
ZERO = Decimal(0)
# Counters this process knows exist (their rows are made once, outside the lock).
_known: set[tuple[str, str]] = set()
_KNOWN_MAX = 100_000
# Seconds a client is told to wait when a turn's own window refused (a new turn may go).
TURN_WINDOW_RETRY_AFTER = 1
# A minute's cap on turns counts the last minute, in one counter per subject.
MINUTE = timedelta(minutes=1)
ROLLING_MINUTE = "m:last"


class BudgetExceeded(Exception):
    """A budget refuses (or needs a person for) this call or turn. `rule` is the tightest
    budget met; `retry_after` the seconds until its window ends (None: a turn's window)."""

    def __init__(self, rule: Rule, *, kind: str, retry_after: int | None, message: str) -> None:
        super().__init__(message)
        self.rule = rule
        self.kind = kind
        self.retry_after = retry_after

    @property
    def budget(self) -> str:
        return self.rule.key


class ModelUnpriced(BudgetExceeded):
    """A budget in dollars applies and the model has no price: the call fails closed."""


@dataclass(slots=True)
class Held:
    """What one call holds: its ledger rows, the counters they moved, the amounts."""

    ids: list[int] = field(default_factory=list)
    counter_ids: list[int] = field(default_factory=list)
    usd: Decimal = ZERO
    tokens: int = 0
    # Warn budgets this call took past their cap (first time in the window).
    warned: list[tuple[Rule, str]] = field(default_factory=list)


# -- the counters ------------------------------------------------------------------------------
class _CountersMissing(Exception):
    pass


@dataclass(slots=True)
class _Window:
    rule: Rule
    key: str  # subject|window
    ends_at: datetime | None
    rolling: bool = False  # the last 60 s (a minute's cap on turns), not a calendar window


def _windows(pairs: list[tuple[Rule, str]], subject: Subject, now: datetime) -> list[_Window]:
    windows = []
    for rule, part in pairs:
        name, ends = window_of(rule, now, subject.turn_id)
        windows.append(_Window(rule, f"{part}|{name}", ends))
    return windows


def _turn_windows(pairs: list[tuple[Rule, str]], subject: Subject, now: datetime) -> list[_Window]:
    """The windows a turn's start is counted in: a minute's is the last 60 s, one rolling
    counter per subject (`started`); the others are their calendar windows."""
    windows = []
    for rule, part in pairs:
        if rule.window == "minute":
            windows.append(_Window(rule, f"{part}|{ROLLING_MINUTE}", now + MINUTE, rolling=True))
        else:
            windows.extend(_windows([(rule, part)], subject, now))
    return windows


def _recent(started: list[float] | None, now: datetime) -> list[float]:
    """The start times still inside the last minute, oldest first."""
    since = (now - MINUTE).timestamp()
    return sorted(moment for moment in started or () if moment > since)


def _ensure(windows: list[_Window], now: datetime) -> None:
    """Make the counters that do not exist yet, before any is locked (an insert that waits
    on another's while holding locks could deadlock)."""
    missing = [w for w in windows if (w.rule.key, w.key) not in _known]
    if not missing:
        return
    BudgetCounter.objects.bulk_create(
        [
            BudgetCounter(budget_key=w.rule.key, window_key=w.key, ends_at=w.ends_at or now)
            for w in missing
        ],
        ignore_conflicts=True,
    )
    if len(_known) > _KNOWN_MAX:
        _known.clear()
    _known.update((w.rule.key, w.key) for w in missing)


_COUNTER_FIELDS = (
    "id",
    "budget_key",
    "window_key",
    "spent_usd",
    "reserved_usd",
    "spent_tokens",
    "reserved_tokens",
    "turns",
    "warned_at",
    "refused_usd",
    "refused_tokens",
    "started",
)


_LOCK_SQL = f"""
    SELECT {", ".join(_COUNTER_FIELDS)} FROM {BudgetCounter._meta.db_table}
     WHERE (budget_key, window_key) IN (SELECT * FROM unnest(%s::text[], %s::text[]))
     ORDER BY id FOR UPDATE
"""


def _lock(windows: list[_Window]) -> dict[tuple[str, str], dict[str, Any]]:
    """The windows' counters, row-locked in id order (inside the caller's transaction)."""
    if connection.vendor == "postgresql":
        with prepared_cursor() as cursor:
            cursor.execute(_LOCK_SQL, [[w.rule.key for w in windows], [w.key for w in windows]])
            rows = [dict(zip(_COUNTER_FIELDS, row, strict=True)) for row in cursor.fetchall()]
        for row in rows:  # Django has psycopg hand jsonb over as text, for JSONField to decode
            row["started"] = json.loads(row["started"]) if row["started"] else []
        found = {(row["budget_key"], row["window_key"]): row for row in rows}
        if len(found) < len({(w.rule.key, w.key) for w in windows}):
            raise _CountersMissing
        return found
    wanted = Q()
    for w in windows:
        wanted |= Q(budget_key=w.rule.key, window_key=w.key)
    rows = (
        BudgetCounter.objects.select_for_update()
        .filter(wanted)
        .order_by("id")
        .values(*_COUNTER_FIELDS)
    )
    found = {(row["budget_key"], row["window_key"]): row for row in rows}
    if len(found) < len({(w.rule.key, w.key) for w in windows}):
        raise _CountersMissing
    return found


def _retry_after(window: _Window, now: datetime) -> int | None:
    if window.ends_at is None:
        return None
    return max(int((window.ends_at - now).total_seconds()) + 1, 1)


def _left_share(cap: Any, used: Any, need: Any) -> Decimal:
    """How much of the cap would be left after `need` (negative: over), as a share of the
    cap, so budgets of dollars and of tokens compare (the tightest has the least)."""
    cap = Decimal(cap)
    left = cap - Decimal(used) - Decimal(need)
    return left / cap if cap else left


def _exceeded_message(rule: Rule, kind: str, window: _Window, retry_after: int | None) -> str:
    what = {"usd": "spending", "tokens": "tokens", "turns": "turns"}[kind]
    when = (
        "for this turn"
        if window.ends_at is None
        else f"for this {rule.window}; it opens again in {retry_after} s"
    )
    if rule.key == "turns-per-minute" and kind == "turns":
        return (
            f"You have started {rule.cap_turns} turns in the last minute, the most allowed "
            f'(budget "{rule.key}"); wait a moment before sending another message.'
        )
    return f'The limit on {what} "{rule.title}" (budget "{rule.key}") is reached {when}.'


def _with_counters(windows: list[_Window], now: datetime, decide: Any) -> Any:
    """Run `decide(counters)` in a transaction holding the windows' counters locked; made
    first when missing (and once more if another process pruned one meanwhile)."""
    for attempt in range(2):
        _ensure(windows, now)
        try:
            with transaction.atomic():
                return decide(_lock(windows))
        except _CountersMissing:
            _known.difference_update((w.rule.key, w.key) for w in windows)
            if attempt:
                raise RuntimeError("budget counters vanished while they were made") from None
    raise AssertionError("unreachable")


def _first_warning(counter_id: int, now: datetime) -> bool:
    return bool(
        BudgetCounter.objects.filter(pk=counter_id, warned_at__isnull=True).update(warned_at=now)
    )


# -- a model call --------------------------------------------------------------------------
def budget_reserve(
    *,
    subject: Subject,
    usd: Decimal | None,
    tokens: int,
    model: str,
    attempt: int = 0,
    allow: frozenset[str] = frozenset(),
    now: datetime | None = None,
) -> Held:
    """Reserve a call's worst case (`usd`, `tokens`) against every budget of calls that
    applies. Raises `BudgetExceeded` for the tightest blocking budget it would pass (none is
    reserved then), `ModelUnpriced` when a budget in dollars applies and `usd` is None (the
    model has no price). `allow`: budgets a person raised for this turn (they count, and
    do not stop it). Warn budgets count and never stop a call."""
    now = now or timezone.now()
    admin = call_rules(subject)
    try:
        return _reserve(subject, admin, usd, tokens, model, attempt, allow, now)
    except _RulesChanged:
        # The cached rules are out of date: read anew, and not checked again (a change
        # committed between that read and this reservation counts from the next call, as
        # when every call read them).
        fresh = admin_rules_read(subject)
        unchecked = AdminRules(fresh.rules, None, fresh=True)
        return _reserve(subject, unchecked, usd, tokens, model, attempt, allow, now)


class _RulesChanged(Exception):
    """The budgets changed since this process cached the ones a call applied."""


def _reserve(
    subject: Subject,
    admin: AdminRules,
    usd: Decimal | None,
    tokens: int,
    model: str,
    attempt: int,
    allow: frozenset[str],
    now: datetime,
) -> Held:
    pairs = [(rule, part) for rule, part in applicable(subject, admin) if rule.counts_calls]
    priced = next((rule for rule, _ in pairs if rule.cap_usd is not None), None)
    if not admin.fresh and (not pairs or (usd is None and priced is not None)):
        # No statement of the call's own will check the cached rules: nothing to reserve,
        # or a refusal for want of a price.
        if generation_now() != admin.generation:
            raise _RulesChanged
    if not pairs:
        return Held()
    if usd is None:
        if priced is not None:
            metrics.budget_unpriced_refusal(budget=priced.key)
            raise ModelUnpriced(
                priced,
                kind="usd",
                retry_after=None,
                message=(
                    f"The model {model or '(unnamed)'} has no price, and the spending limit "
                    f'"{priced.title}" (budget "{priced.key}") needs one: give it a price in '
                    "GLOVE_MODEL_PRICES (0 for a free model)."
                ),
            )
        usd = ZERO
    windows = _windows(pairs, subject, now)
    call = _Call(subject=subject, usd=usd, tokens=tokens, model=model[:200], attempt=attempt)
    refused: list[int] = []

    def blocked(counters: dict[tuple[str, str], dict[str, Any]], over: list[_Over]) -> None:
        """Raise `BudgetExceeded` for the tightest blocking budget `over` holds, if any."""
        blocking = _blocking(over, allow)
        if not blocking:
            return
        rule, _, kind, window = min(blocking, key=lambda entry: entry[1])
        metrics.budget_limit_reached(budget=rule.key, action=rule.action)
        retry = _retry_after(window, now)
        refused.extend(
            counters[(entry[0].key, entry[3].key)]["id"]
            for entry in blocking
            if entry[0].action == "refuse"
        )
        raise BudgetExceeded(
            rule, kind=kind, retry_after=retry, message=_exceeded_message(rule, kind, window, retry)
        )

    def warned(
        held: Held, counters: dict[tuple[str, str], dict[str, Any]], over: list[_Over]
    ) -> Held:
        for rule, _, _, window in over:
            if rule.blocks:
                continue  # a raised limit: the person who raised it knows
            if _first_warning(counters[(rule.key, window.key)]["id"], now):
                held.warned.append((rule, window.key))
        return held

    def decide(counters: dict[tuple[str, str], dict[str, Any]]) -> Held:
        over = _over(windows, counters, usd, tokens)
        blocked(counters, over)
        ids = sorted({counters[(w.rule.key, w.key)]["id"] for w in windows})
        held = Held(
            ids=_reservations_write(
                counter_ids=ids,
                rows=[(counters[(w.rule.key, w.key)]["id"], w.rule.key, w.key) for w in windows],
                turn_id=subject.turn_id,
                attempt=attempt,
                model=call.model,
                usd=usd,
                tokens=tokens,
                now=now,
            ),
            counter_ids=ids,
            usd=usd,
            tokens=tokens,
            warned=[],
        )
        return warned(held, counters, over)

    try:
        if _on_postgres():
            held = _reserve_at_once(
                windows, call, allow, now, blocked, warned, generation=admin.generation
            ) or _with_counters(windows, now, decide)
        else:
            held = _with_counters(windows, now, decide)
    except BudgetExceeded:
        if refused:
            # After the rollback: what did not fit, so the next turns are refused at once.
            BudgetCounter.objects.filter(pk__in=refused).update(
                refused_usd=usd, refused_tokens=tokens
            )
        raise
    if held.warned:
        warn_staff(held.warned, subject)
    return held


# (rule, share of its cap left, "usd" or "tokens", window): a cap this call would pass.
_Over = tuple[Rule, Decimal, str, _Window]


@dataclass(frozen=True, slots=True)
class _Call:
    subject: Subject
    usd: Decimal
    tokens: int
    model: str
    attempt: int


def _blocking(over: list[_Over], allow: frozenset[str]) -> list[_Over]:
    return [entry for entry in over if entry[0].blocks and entry[0].key not in allow]


def _over(
    windows: list[_Window],
    counters: dict[tuple[str, str], dict[str, Any]],
    usd: Decimal,
    tokens: int,
) -> list[_Over]:
    """Every cap (blocking or not) the call's worst case would pass, given the counters as
    they were before it."""
    over: list[_Over] = []
    for w in windows:
        row = counters[(w.rule.key, w.key)]
        for kind, cap, used, need in (
            ("usd", w.rule.cap_usd, row["spent_usd"] + row["reserved_usd"], usd),
            ("tokens", w.rule.cap_tokens, row["spent_tokens"] + row["reserved_tokens"], tokens),
        ):
            if cap is not None and Decimal(used) + Decimal(need) > Decimal(cap):
                over.append((w.rule, _left_share(cap, used, need), kind, w))
    return over


_COUNTERS = BudgetCounter._meta.db_table
_LEDGER = BudgetReservation._meta.db_table
# PostgreSQL: the counters gain the reservation and the ledger its rows in one statement (the
# counters are locked already, by `_lock`, in the same transaction).
_RESERVE_SQL = f"""
    WITH counted AS (
        UPDATE {_COUNTERS} SET reserved_usd = reserved_usd + %s,
                               reserved_tokens = reserved_tokens + %s
         WHERE id = ANY(%s)
    )
    INSERT INTO {_LEDGER} (counter_id, budget_key, window_key, turn_id, attempt, model, state,
                           reserved_usd, settled_usd, reserved_tokens, settled_tokens,
                           created_at)
    SELECT c, k, w, %s, %s, %s, 'reserved', %s, 0, %s, 0, %s
      FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS t(c, k, w)
    RETURNING id
"""
# A statement's own transaction commits without waiting for the disk (true), or it runs in
# the caller's transaction, whose commit mode stays as it is (false).
_EARLY_COMMIT = """
    SELECT set_config('synchronous_commit',
                      CASE WHEN %(early)s::boolean THEN 'off'
                           ELSE current_setting('synchronous_commit') END, true) AS early
"""
# What a call's check reads of its counters (`_over`, the refusal, the warnings).
_CALL_FIELDS = (
    "id",
    "budget_key",
    "window_key",
    "spent_usd",
    "reserved_usd",
    "spent_tokens",
    "reserved_tokens",
)
# PostgreSQL: a call's whole reservation in one statement, one round trip: the windows'
# counters locked in id order (as `_lock` locks them), the blocking caps checked against
# them (`cap_usd`/`cap_tokens` null: the window does not block this call), and only if the
# budgets are still those the caller's rules were read at (`generation`, null: not
# checked), every counter exists and every blocking cap holds, the counters gain the
# reservation and the ledger its rows. The windows come as one JSON text and every value
# once (named parameters): psycopg took about four times as long to dump a list per column
# and each value as often as it was used. The JSON goes through an array so the planner
# counts about 10 windows, as for any array (of a set-returning function it assumes 100,
# and then took a scan of every counter for the cheaper way in). It returns the generation, `fits`, and the
# counters as they were before it (the caller names the budget that refused, or warns)
# with each counter's ledger row: one row at least.
_AT_ONCE_SQL = f"""
    WITH want AS (
        SELECT w->>0 AS budget_key, w->>1 AS window_key, (w->>2)::numeric AS cap_usd,
               (w->>3)::bigint AS cap_tokens
          FROM unnest(ARRAY(SELECT json_array_elements(%(windows)s::json))) AS w
    ), locked AS MATERIALIZED (
        SELECT {", ".join(_CALL_FIELDS)} FROM {_COUNTERS}
         WHERE (budget_key, window_key) IN (SELECT budget_key, window_key FROM want)
         ORDER BY id FOR UPDATE
    ), known AS MATERIALIZED (
        SELECT (SELECT generation FROM {GENERATION_TABLE} WHERE id = 1) AS generation
    ), mode AS MATERIALIZED ({_EARLY_COMMIT}), verdict AS MATERIALIZED (
        SELECT coalesce(
                   %(generation)s::bigint IS NULL
                   OR (SELECT generation FROM known) = %(generation)s::bigint, false)
               AND (SELECT count(*) FROM locked) = (SELECT count(*) FROM want)
               AND coalesce(bool_and(
                   (w.cap_usd IS NULL
                    OR l.spent_usd + l.reserved_usd + %(usd)s::numeric <= w.cap_usd)
                   AND (w.cap_tokens IS NULL
                        OR l.spent_tokens + l.reserved_tokens + %(tokens)s::bigint
                           <= w.cap_tokens)
               ), true) AND (SELECT early FROM mode) IS NOT NULL AS fits
          FROM want w JOIN locked l USING (budget_key, window_key)
    ), counted AS (
        UPDATE {_COUNTERS} SET reserved_usd = reserved_usd + %(usd)s::numeric,
                               reserved_tokens = reserved_tokens + %(tokens)s::bigint
         WHERE id IN (SELECT id FROM locked) AND (SELECT fits FROM verdict)
    ), written AS (
        INSERT INTO {_LEDGER} (counter_id, budget_key, window_key, turn_id, attempt, model,
                               state, reserved_usd, settled_usd, reserved_tokens,
                               settled_tokens, created_at)
        SELECT l.id, l.budget_key, l.window_key, %(turn)s::bigint, %(attempt)s::int,
               %(model)s::text, 'reserved', %(usd)s::numeric, 0, %(tokens)s::bigint, 0,
               %(now)s::timestamptz
          FROM locked l WHERE (SELECT fits FROM verdict)
        RETURNING id, counter_id
    )
    SELECT k.generation, v.fits, {", ".join(f"l.{name}" for name in _CALL_FIELDS)}, written.id
      FROM known k CROSS JOIN verdict v
      LEFT JOIN (locked l LEFT JOIN written ON written.counter_id = l.id) ON true
     ORDER BY l.id
"""


def _reserve_at_once(
    windows: list[_Window],
    call: _Call,
    allow: frozenset[str],
    now: datetime,
    blocked: Callable[[dict[tuple[str, str], dict[str, Any]], list[_Over]], None],
    warned: Callable[[Held, dict[tuple[str, str], dict[str, Any]], list[_Over]], Held],
    *,
    generation: int | None,
) -> Held | None:
    """The reservation as `_AT_ONCE_SQL` (PostgreSQL): one round trip and a commit that
    does not wait for the disk. `blocked` raises for the refusing budget; `_RulesChanged`
    when the budgets are no longer those of `generation` (nothing is written then); None
    when this statement's verdict and `_over`'s disagree (then the transactional path
    decides)."""
    caps: dict[tuple[str, str], tuple[Any, Any]] = {}
    for w in windows:
        blocks = w.rule.blocks and w.rule.key not in allow
        caps[(w.rule.key, w.key)] = (w.rule.cap_usd, w.rule.cap_tokens) if blocks else (None, None)
    wanted = json.dumps(
        [
            [key, window, None if usd is None else str(usd), tokens]
            for (key, window), (usd, tokens) in sorted(caps.items())
        ]
    )
    width = len(_CALL_FIELDS)
    for attempt in range(2):
        _ensure(windows, now)
        with prepared_cursor() as cursor:
            cursor.execute(
                _AT_ONCE_SQL,
                {
                    "windows": wanted,
                    "generation": generation,
                    "early": not connection.in_atomic_block,
                    "usd": call.usd,
                    "tokens": call.tokens,
                    "turn": call.subject.turn_id,
                    "attempt": call.attempt,
                    "model": call.model,
                    "now": now,
                },
            )
            rows = cursor.fetchall()
        if generation is not None and rows[0][0] != generation:
            raise _RulesChanged
        counters: dict[tuple[str, str], dict[str, Any]] = {}
        ledger_ids: list[int] = []
        fits = bool(rows[0][1])
        for row in rows:
            if row[2] is None:
                continue  # no counter: the one row says only the generation and `fits`
            counter = dict(zip(_CALL_FIELDS, row[2 : 2 + width], strict=True))
            counters[(counter["budget_key"], counter["window_key"])] = counter
            if row[2 + width] is not None:
                ledger_ids.append(row[2 + width])
        if len(counters) == len(caps):
            break
        _known.difference_update(caps)  # pruned meanwhile: made again, once
        if attempt:
            raise RuntimeError("budget counters vanished while they were made")
    over = _over(windows, counters, call.usd, call.tokens)
    if bool(_blocking(over, allow)) == fits:
        # Cannot happen while the statement and `_over` agree; if they ever do not, what
        # this one wrote goes back and the transactional path decides.
        if fits:
            _finish(
                Held(ids=ledger_ids, counter_ids=[], usd=call.usd, tokens=call.tokens),
                usd=ZERO,
                tokens=0,
                state=State.RELEASED,
                now=now,
            )
        logger.error("budgets: the one-statement check disagreed with the rules; rechecked")
        return None
    if not fits:
        blocked(counters, over)
    held = Held(
        ids=sorted(ledger_ids),
        counter_ids=sorted(counter["id"] for counter in counters.values()),
        usd=call.usd,
        tokens=call.tokens,
        warned=[],
    )
    return warned(held, counters, over)


# PostgreSQL: a call's settlement in one statement, atomic on its own: its open rows move
# (the conditional state: a take-back that closed them first leaves nothing to move), then
# their counters, locked in id order as `_lock` locks them (no deadlock with a reservation).
# The rows are found by their ids, the state checked as `(state = 'reserved') IS TRUE` so the
# planner cannot match `budget_open_idx`: by its statistics a small index and the cheaper
# way in, it holds an entry for every reservation since the ledger's last vacuum, and a
# settlement read them all. The ids come as JSON, made an array in the statement: an
# array parameter's length would be known to a custom plan and not to the generic one,
# which then looked dearer and was never chosen (the statement was planned anew every
# time). Each value is passed once (named).
_FINISH_SQL = f"""
    WITH mode AS MATERIALIZED ({_EARLY_COMMIT}), moved AS (
        UPDATE {_LEDGER} SET state = %(state)s, settled_usd = %(usd)s::numeric,
                             settled_tokens = %(tokens)s::bigint, settled_at = %(now)s
         WHERE id = ANY(ARRAY(SELECT json_array_elements_text(%(ids)s::json)::bigint))
           AND (state = 'reserved') IS TRUE
           AND (SELECT early FROM mode) IS NOT NULL
        RETURNING counter_id
    ), locked AS MATERIALIZED (
        SELECT id FROM {_COUNTERS} WHERE id IN (SELECT counter_id FROM moved)
         ORDER BY id FOR UPDATE
    )
    UPDATE {_COUNTERS} AS c
       SET reserved_usd = c.reserved_usd - %(held_usd)s::numeric,
           spent_usd = c.spent_usd + %(usd)s::numeric,
           reserved_tokens = c.reserved_tokens - %(held_tokens)s::bigint,
           spent_tokens = c.spent_tokens + %(tokens)s::bigint
      FROM locked WHERE c.id = locked.id
    RETURNING c.id
"""


def _on_postgres() -> bool:
    return connection.vendor == "postgresql"


def _reservations_write(
    *,
    counter_ids: list[int],
    rows: list[tuple[int, str, str]],
    turn_id: int | None,
    attempt: int,
    model: str,
    usd: Decimal,
    tokens: int,
    now: datetime,
) -> list[int]:
    """Add the reservation to the (locked) counters and write its ledger rows; their ids."""
    if _on_postgres():
        with prepared_cursor() as cursor:
            cursor.execute(
                _RESERVE_SQL,
                [
                    usd,
                    tokens,
                    counter_ids,
                    turn_id,
                    attempt,
                    model,
                    usd,
                    tokens,
                    now,
                    [row[0] for row in rows],
                    [row[1] for row in rows],
                    [row[2] for row in rows],
                ],
            )
            return [row[0] for row in cursor.fetchall()]
    BudgetCounter.objects.filter(pk__in=counter_ids).update(
        reserved_usd=F("reserved_usd") + usd, reserved_tokens=F("reserved_tokens") + tokens
    )
    made = BudgetReservation.objects.bulk_create(
        [
            BudgetReservation(
                counter_id=counter_id,
                budget_key=budget_key,
                window_key=window_key,
                turn_id=turn_id,
                attempt=attempt,
                model=model,
                reserved_usd=usd,
                reserved_tokens=tokens,
                created_at=now,
            )
            for counter_id, budget_key, window_key in rows
        ]
    )
    return [row.pk for row in made]


def _finish(held: Held, *, usd: Decimal, tokens: int, state: str, now: datetime) -> bool:
    """Move the call's open ledger rows to `state` at (usd, tokens), and their counters
    with them; False when a take-back closed them first (nothing moves twice)."""
    if not held.ids:
        return True
    if _on_postgres():
        # One statement on its own (its own transaction unless the caller holds one), whose
        # commit does not wait for the disk: a settlement lost in a crash leaves its
        # reservation open, which the take-back (or the sweep) settles at its maximum.
        # Counted high, never low (docs/howto/budgets.md, "What it costs").
        with prepared_cursor() as cursor:
            cursor.execute(
                _FINISH_SQL,
                {
                    "early": not connection.in_atomic_block,
                    "state": state,
                    "usd": usd,
                    "tokens": tokens,
                    "now": now,
                    "ids": json.dumps(held.ids),
                    "held_usd": held.usd,
                    "held_tokens": held.tokens,
                },
            )
            return bool(cursor.fetchall())
    with transaction.atomic():
        moved = list(
            BudgetReservation.objects.select_for_update()
            .filter(pk__in=held.ids, state=State.RESERVED)
            .values_list("counter_id", flat=True)
        )
        if not moved:
            return False
        BudgetReservation.objects.filter(pk__in=held.ids, state=State.RESERVED).update(
            state=state, settled_usd=usd, settled_tokens=tokens, settled_at=now
        )
        BudgetCounter.objects.filter(pk__in=moved).update(
            reserved_usd=F("reserved_usd") - held.usd,
            spent_usd=F("spent_usd") + usd,
            reserved_tokens=F("reserved_tokens") - held.tokens,
            spent_tokens=F("spent_tokens") + tokens,
        )
    return True


def budget_settle(
    *, held: Held, usd: Decimal | None, tokens: int, now: datetime | None = None
) -> bool:
    """The call returned: its reservation becomes its actual cost (None: no price, only a
    model without a budget in dollars gets here, and it counts 0)."""
    return _finish(
        held, usd=usd or ZERO, tokens=tokens, state=State.SETTLED, now=now or timezone.now()
    )


def budget_release(*, held: Held, now: datetime | None = None) -> bool:
    """The call failed before it answered (or never went): nothing of it is counted."""
    return _finish(held, usd=ZERO, tokens=0, state=State.RELEASED, now=now or timezone.now())


def budget_reservations_close(
    *, turn_id: int, below_attempt: int | None = None, now: datetime | None = None
) -> int:
    """Settle the open reservations of a turn whose worker is gone (taken back, or past
    its attempts) at their reserved maximum: its call may have been billed, and nobody
    knows its usage. `below_attempt`: only those of earlier attempts. Returns how many."""
    now = now or timezone.now()
    with transaction.atomic():
        open_rows = BudgetReservation.objects.select_for_update().filter(
            turn_id=turn_id, state=State.RESERVED
        )
        if below_attempt is not None:
            open_rows = open_rows.filter(attempt__lt=below_attempt)
        rows = list(open_rows.order_by("id").values_list("id", "counter_id"))
        if not rows:
            return 0
        BudgetReservation.objects.filter(pk__in=[pk for pk, _ in rows]).update(
            state=State.SETTLED,
            settled_usd=F("reserved_usd"),
            settled_tokens=F("reserved_tokens"),
            settled_at=now,
        )
        for pk, counter_id in rows:
            amounts = BudgetReservation.objects.filter(pk=pk).values(
                "reserved_usd", "reserved_tokens"
            )[0]
            BudgetCounter.objects.filter(pk=counter_id).update(
                reserved_usd=F("reserved_usd") - amounts["reserved_usd"],
                spent_usd=F("spent_usd") + amounts["reserved_usd"],
                reserved_tokens=F("reserved_tokens") - amounts["reserved_tokens"],
                spent_tokens=F("spent_tokens") + amounts["reserved_tokens"],
            )
    logger.warning(
        "turn %s: %d budget reservations of a stopped worker settled at their maximum",
        turn_id,
        len(rows),
    )
    return len(rows)


def open_reservation_turns(*, older_than: timedelta, limit: int = 500) -> list[int]:
    """Turns with reservations open for longer than `older_than` (a sweep looks whether
    those turns still run)."""
    cut = timezone.now() - older_than
    return list(
        BudgetReservation.objects.filter(state=State.RESERVED, created_at__lt=cut)
        .exclude(turn_id__isnull=True)
        .order_by("created_at")
        .values_list("turn_id", flat=True)
        .distinct()[:limit]
    )


# -- a turn's start ----------------------------------------------------------------------
def budget_admit_turn(*, subject: Subject, now: datetime | None = None) -> None:
    """Count a new turn against the budgets with a cap of turns, or raise `BudgetExceeded`
    (nothing counted) for the tightest blocking one it would pass; a refusing budget of
    money or tokens already spent for its window refuses the turn too. Call inside the
    transaction that stores the turn: it counts only if the turn is stored."""
    now = now or timezone.now()
    pairs = applicable(subject)
    if not pairs:
        return
    counting = [(rule, part) for rule, part in pairs if rule.counts_turns]
    refusing = [
        (rule, part)
        for rule, part in pairs
        if rule.counts_calls and rule.action == "refuse" and rule.window != "turn"
    ]
    if refusing:
        _refuse_spent(_windows(refusing, subject, now), now)
    if not counting:
        return
    windows = _turn_windows(counting, subject, now)

    def decide(counters: dict[tuple[str, str], dict[str, Any]]) -> list[tuple[Rule, str]]:
        over = []
        recent: dict[int, list[float]] = {}
        for w in windows:
            row = counters[(w.rule.key, w.key)]
            used = row["turns"]
            if w.rolling:
                recent[row["id"]] = _recent(row["started"], now)
                used = len(recent[row["id"]])
            if used + 1 > w.rule.cap_turns:
                over.append((w.rule, _left_share(w.rule.cap_turns, used, 1), w))
        blocking = [entry for entry in over if entry[0].blocks]
        if blocking:
            rule, _, window = min(blocking, key=lambda entry: entry[1])
            metrics.budget_limit_reached(budget=rule.key, action=rule.action)
            if window.rolling:
                # It opens again when the oldest turn of the last minute leaves it.
                oldest = recent[counters[(rule.key, window.key)]["id"]][0]
                retry = max(math.ceil(oldest + MINUTE.total_seconds() - now.timestamp()), 1)
            else:
                retry = _retry_after(window, now)
            raise BudgetExceeded(
                rule,
                kind="turns",
                retry_after=retry,
                message=_exceeded_message(rule, "turns", window, retry),
            )
        ids = sorted({counters[(w.rule.key, w.key)]["id"] for w in windows if not w.rolling})
        BudgetCounter.objects.filter(pk__in=ids).update(turns=F("turns") + 1)
        for counter_id, started in recent.items():
            started = [*started, now.timestamp()]
            BudgetCounter.objects.filter(pk=counter_id).update(
                started=started,
                turns=len(started),
                ends_at=now + MINUTE,
                # A quiet minute ends a warn budget's warning: the next crossing warns again.
                **({"warned_at": None} if len(started) == 1 else {}),
            )
        return [
            (rule, window.key)
            for rule, _, window in over
            if _first_warning(counters[(rule.key, window.key)]["id"], now)
        ]

    warned = _with_counters(windows, now, decide)
    if warned:
        warn_staff(warned, subject)


def _refuse_spent(windows: list[_Window], now: datetime) -> None:
    wanted = Q()
    for w in windows:
        wanted |= Q(budget_key=w.rule.key, window_key=w.key)
    rows = {
        (row["budget_key"], row["window_key"]): row
        for row in BudgetCounter.objects.filter(wanted).values(*_COUNTER_FIELDS)
    }
    spent: list[tuple[Rule, Decimal, str, _Window]] = []
    for w in windows:
        row = rows.get((w.rule.key, w.key))
        if row is None:
            continue
        for kind, cap, used, last_refused in (
            ("usd", w.rule.cap_usd, row["spent_usd"] + row["reserved_usd"], row["refused_usd"]),
            (
                "tokens",
                w.rule.cap_tokens,
                row["spent_tokens"] + row["reserved_tokens"],
                row["refused_tokens"],
            ),
        ):
            if cap is None:
                continue
            need = Decimal(last_refused or 0)
            # Spent, or a call this window refused still would not fit under this cap.
            if Decimal(used) >= Decimal(cap) or (
                last_refused is not None and Decimal(used) + need > Decimal(cap)
            ):
                spent.append((w.rule, _left_share(cap, used, need), kind, w))
    if spent:
        rule, _, kind, window = min(spent, key=lambda entry: entry[1])
        metrics.budget_limit_reached(budget=rule.key, action=rule.action)
        retry = _retry_after(window, now)
        raise BudgetExceeded(
            rule, kind=kind, retry_after=retry, message=_exceeded_message(rule, kind, window, retry)
        )


# -- at a warn budget's cap ------------------------------------------------------------------
def warn_staff(warned: list[tuple[Rule, str]], subject: Subject) -> None:
    """A warn budget's cap was passed (once per window): the metric now, and an inbox item
    in the session for staff, after the reservation commits."""
    for rule, _ in warned:
        metrics.budget_limit_reached(budget=rule.key, action=rule.action)

    def post() -> None:
        from inbox.services import inbox_item_add

        for rule, window_key in warned:
            text = (
                f'Budget "{rule.key}" ({rule.title}) passed its cap for {window_key}; '
                "calls go on (its action is warn). Raise the cap or change its action in the "
                "admin's budgets."
            )
            try:
                inbox_item_add(
                    session_id=subject.session_id,
                    item=CoreInboxItem(
                        id=f"budget_{secrets.token_hex(8)}",
                        tag=f"budget:warning:{rule.key}"[:200],
                        request=text,
                    ),
                )
            except Exception:
                logger.exception("could not post the warning of budget %s", rule.key)

    transaction.on_commit(post)


# -- retention and the ledger's balance --------------------------------------------------------
def budget_ledger_prune(*, older_than: timedelta) -> int:
    """Forget settled and released ledger rows older than `older_than`, and the counters of
    windows that ended before it with nothing reserved. Open reservations stay."""
    if older_than <= timedelta(0):
        raise ValueError("older_than must be positive")
    cut = timezone.now() - older_than
    rows = delete_in_batches(
        BudgetReservation.objects.filter(created_at__lt=cut).exclude(state=State.RESERVED)
    )
    counters = delete_in_batches(
        BudgetCounter.objects.filter(ends_at__lt=cut, reserved_usd=0, reserved_tokens=0)
    )
    if counters:
        _known.clear()
    return rows + counters


def ledger_balance(*, turn_ids: list[int] | None = None) -> dict[str, Any]:
    """Reserved, settled and released dollars over the ledger (or these turns' rows), and
    how many rows are still open: reserved = settled + released + open."""
    from django.db.models import Count, Sum

    rows = BudgetReservation.objects.all()
    if turn_ids is not None:
        rows = rows.filter(turn_id__in=turn_ids)
    totals = rows.aggregate(
        reserved=Sum("reserved_usd"),
        settled=Sum("settled_usd", filter=Q(state=State.SETTLED)),
        released=Sum(F("reserved_usd") - F("settled_usd"), filter=~Q(state=State.RESERVED)),
        open_usd=Sum("reserved_usd", filter=Q(state=State.RESERVED)),
        open=Count("id", filter=Q(state=State.RESERVED)),
        rows=Count("id"),
    )
    return {name: (value if value is not None else ZERO) for name, value in totals.items()}
