"""The keyset condition of a paged list, as one row comparison the index reads from.

`(created_at, key) < (at, tie)` is the condition PostgreSQL takes as an index bound on an
index of (…, created_at, key): the page is an ordered index range scan that stops after its
rows. Spelt as `created_at <= at AND (created_at < at OR (created_at = at AND key < tie))`
the planner estimates its rows as if the list's owner and its times were unrelated, and for
a person whose chats are all old it read and sorted every row past the cursor instead (the
figures: docs/explanation/scale.md). SQLite compares row values too (Django spells it out where not).
"""

from __future__ import annotations

from typing import Any

from django.db.models.fields.tuple_lookups import Tuple, TupleGreaterThan, TupleLessThan

from gloveapp.lib.paging import Cursor


def before(cursor: Cursor, *, at: str = "created_at", tie: str = "key") -> Any:
    """Rows after `cursor` in a newest-first list: `(at, tie) < (cursor.at, cursor.tie)`."""
    return TupleLessThan(Tuple(at, tie), (cursor.at, cursor.tie))


def after(cursor: Cursor, *, at: str = "created_at", tie: str = "id") -> Any:
    """Rows after `cursor` in an oldest-first list: `(at, tie) > (cursor.at, cursor.tie)`."""
    return TupleGreaterThan(Tuple(at, tie), (cursor.at, cursor.tie))
