"""Admin changelists that cost the same at ten thousand rows and at ten million.

Django's changelist, as it comes, counts the whole table twice per page (the result count and
the "N total" beside a search), builds filters from `SELECT DISTINCT` over a column (or lists
every row of a related table as links), sorts on any column and searches `%term%` in every
search field: at a million rows, tens of seconds a page (the figures: bench/README.md). Every
changelist of the project takes its shape from `ScaleAdmin` instead:

- **Counts**: an unfiltered list on PostgreSQL shows the planner's estimate of the table's
  rows (`pg_class.reltuples`, kept by autovacuum's ANALYZE); anything else is counted
  exactly up to `COUNT_CAP` rows and shown as "more than ..." past it (a `LIMIT`-ed count:
  bounded work). Pages are offered up to `COUNT_CAP` rows deep (a deeper `OFFSET` reads every
  row before it): past that, a filter or a search narrows the list. No "N total" count.
- **Orderings** on indexed columns only (`ordering`, `sortable_by` in each admin, each named
  with the index that serves it).
- **Filters** with fixed choices (a model's choices, the configured agents), or a box where
  staff type an exact value (`ExactValueFilter`), never a list read from the table.
- **Search** by what an index finds (`search_exact`, `search_prefix`, `search_text`,
  `search_usernames`): exact ids, id prefixes (PostgreSQL's `varchar_pattern_ops` index
  Django makes for a text primary key), an exact username (that person's rows alone: their
  ids, then the indexed foreign key), and words in text through a trigram index on PostgreSQL
  (`pg_trgm`, `django.contrib.postgres`; a plain `LIKE` on SQLite, whose tables are small).
  A search with few matches (`SEARCH_SORT_CAP`) is sorted among its matches alone.
- No date hierarchy (it is a `SELECT DISTINCT` of the dates over the table) and no facet
  counts.
"""

from __future__ import annotations

import ipaddress
import math
import uuid
from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.db import DataError, connections
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponseBadRequest
from django.utils.functional import cached_property

# Rows counted exactly, at most, and the deepest row a page may start at (20 pages of 50).
# A count reads up to this many matching rows: a filter that matches one row in 200 reads
# 200,000 (measured: 0.2 s at 10,000 on a million approvals), so it is small.
COUNT_CAP = 1_000
# Users a username search may match (exact usernames: one, or none).
USERNAME_MATCHES = 10
# A search with at most this many matches is sorted among its matches alone (one indexed
# read of their ids first): walking the list's order and testing each row read every row
# before the first match (a search whose matches were the oldest read 89,000 rows for a
# page of 50 at 10M). Past it, matches are common enough for the walk to find a page soon.
SEARCH_SORT_CAP = 2_000


class EstimatedCountPaginator(Paginator):
    """A paginator that never counts more than COUNT_CAP rows (see the module's docstring).

    `count_kind` says what `count` is: "exact", "estimate" (the planner's, for an
    unfiltered list on PostgreSQL) or "more" (the list has more than `count` rows)."""

    count_kind = "exact"

    @cached_property
    def count(self) -> int:  # type: ignore[override]
        queryset = self.object_list
        estimate = table_estimate(queryset)
        if estimate is not None and estimate > COUNT_CAP:
            self.count_kind = "estimate"
            return estimate
        # A count of at most COUNT_CAP + 1 rows: the subquery stops there.
        counted = queryset.order_by()[: COUNT_CAP + 1].count()
        if counted > COUNT_CAP:
            self.count_kind = "more"
            return COUNT_CAP
        return counted

    @cached_property
    def num_pages(self) -> int:  # type: ignore[override]
        if self.count == 0 and not self.allow_empty_first_page:
            return 0
        rows = min(self.count, COUNT_CAP)
        hits = max(1, rows - self.orphans)
        return math.ceil(hits / self.per_page)


def table_estimate(queryset: QuerySet) -> int | None:
    """The planner's estimate of the rows of `queryset`'s table, for a queryset with no
    filter on PostgreSQL; else None. -1 (never analysed) is None too. A table partitioned
    by day (`gloveapp.lib.db.partitions`) is the sum of its partitions' estimates: autovacuum
    analyses the partitions, never the parent."""
    query = queryset.query
    connection = connections[queryset.db]
    if connection.vendor != "postgresql" or query.where or query.combinator:
        return None
    if query.distinct or query.group_by is not None or query.is_sliced:
        return None
    table = queryset.model._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT CASE WHEN bool_and(c.reltuples < 0) THEN -1 "
            "ELSE SUM(GREATEST(c.reltuples, 0)) END::bigint FROM pg_class c "
            "WHERE c.relkind <> 'p' AND (c.oid = to_regclass(%s) OR c.oid IN "
            "(SELECT relid FROM pg_partition_tree(to_regclass(%s)) WHERE isleaf))",
            [table, table],
        )
        row = cursor.fetchone()
    if row is None or row[0] is None or row[0] < 0:
        return None
    return int(row[0])


# Longer than any id or name the lists are searched by: no row has it.
MAX_TERM_CHARS = 500


def usable(value: str) -> bool:
    """Whether a typed value can be looked up at all: no NUL (PostgreSQL's text refuses it)
    and not longer than any column searched."""
    return "\x00" not in value and len(value) <= MAX_TERM_CHARS


class ExactValueFilter(admin.SimpleListFilter):
    """A filter where staff type one exact value (an id, a name) instead of picking it from a
    list read from the table. Subclasses set `title`, `parameter_name` and `field`."""

    template = "admin/glove_exact_value_filter.html"
    field = ""
    placeholder = ""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return []

    def has_output(self) -> bool:
        return True

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = (self.value() or "").strip()
        if not value:
            return queryset
        return queryset.filter(**{self.field: value}) if usable(value) else queryset.none()

    def choices(self, changelist: Any) -> Any:
        # The template reads what to keep in the query string (the other filters, the
        # search) from here.
        other = changelist.get_filters_params()
        other.pop(self.parameter_name, None)
        yield {
            "value": self.value() or "",
            "parameter_name": self.parameter_name,
            "placeholder": self.placeholder,
            "clear_url": changelist.get_query_string(remove=[self.parameter_name]),
            "hidden": [
                (key, value)
                for key, values in other.items()
                for value in (values if isinstance(values, list) else [values])
            ]
            + ([("q", changelist.query)] if changelist.query else []),
        }


class FixedChoicesFilter(admin.SimpleListFilter):
    """A filter whose choices come from code (`choices()`), never from the table."""

    field = ""

    def fixed_choices(self) -> list[tuple[str, str]]:
        raise NotImplementedError

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return self.fixed_choices()

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if not value:
            return queryset
        if value not in {choice for choice, _ in self.fixed_choices()}:
            return queryset.none()
        return queryset.filter(**{self.field: value})


def _coerced(model: Any, path: str, term: str) -> Any:
    """`term` as the value of the field at `path` (a column of `model` or of a model it
    points to), or None when it cannot be one (a word is no integer id, UUID or address)."""
    field = None
    opts = model._meta
    for part in path.split("__"):
        field = opts.get_field(part)
        if field.is_relation and field.related_model is not None:
            target = field.target_field if hasattr(field, "target_field") else None
            opts = field.related_model._meta
            if part == path.split("__")[-1] and target is not None:
                field = target
    internal = field.get_internal_type() if field is not None else ""
    try:
        if internal.endswith(("AutoField", "IntegerField")):
            number = int(term)
            # Beyond any integer column: no row has it (and the database would refuse it).
            return number if -(2**63) <= number < 2**63 else None
        if internal == "UUIDField":
            return uuid.UUID(term)
        if internal == "GenericIPAddressField":
            return str(ipaddress.ip_address(term))
    except ValueError:
        return None
    max_length = getattr(field, "max_length", None)
    if max_length and len(term) > max_length:
        return None
    return term


class ScaleAdmin(admin.ModelAdmin):
    """A ModelAdmin whose changelist is bounded whatever the table's size (the module's
    docstring). Set `search_exact` / `search_prefix` / `search_text` / `search_usernames`
    instead of `search_fields`, and filters with fixed choices or exact values."""

    paginator = EstimatedCountPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 50
    list_max_show_all = 200
    date_hierarchy = None

    search_exact: tuple[str, ...] = ()
    search_prefix: tuple[str, ...] = ()
    search_text: tuple[str, ...] = ()
    search_usernames: tuple[str, ...] = ()

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        # Django applies any query parameter naming a column as a filter: a value no column
        # can hold is the client's mistake (400, naming it), never a database error (500).
        for name, values in request.GET.lists():
            if not all(usable(value) for value in values):
                return HttpResponseBadRequest(
                    f"{name}: a NUL character, or longer than {MAX_TERM_CHARS} characters.",
                    content_type="text/plain; charset=utf-8",
                )
        try:
            return super().changelist_view(request, extra_context)
        except DataError as error:  # e.g. a number beyond its column's range
            return HttpResponseBadRequest(
                f"A filter's value does not fit its column: {error}".splitlines()[0],
                content_type="text/plain; charset=utf-8",
            )

    def get_search_fields(self, request: HttpRequest) -> Any:
        # Non-empty shows the search box; the search itself is get_search_results below.
        fields = self.search_exact + self.search_prefix + self.search_text + self.search_usernames
        return fields or super().get_search_fields(request)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        if not usable(term):
            return queryset.none(), False
        if not (
            self.search_exact or self.search_prefix or self.search_text or self.search_usernames
        ):
            return super().get_search_results(request, queryset, search_term)
        if self.search_usernames:
            # An exact username is a person: their rows alone, one indexed foreign key (in an
            # OR with the other fields, the list's order could not come from an index).
            user_ids = list(
                get_user_model()
                .objects.filter(username=term)
                .values_list("pk", flat=True)[:USERNAME_MATCHES]
            )
            if user_ids:
                condition = Q()
                for path in self.search_usernames:
                    condition |= Q(**{f"{path}__in": user_ids})
                return queryset.filter(condition), False
        condition = Q()
        for path in self.search_exact:
            value = _coerced(self.model, path, term)
            if value is not None:
                condition |= Q(**{path: value})
        for path in self.search_prefix:
            if _coerced(self.model, path, term) is not None:
                condition |= Q(**{f"{path}__startswith": term})
        for path in self.search_text:
            condition |= Q(**{f"{path}__icontains": term})
        if not condition:
            return queryset.none(), False
        return _few_sorted_alone(queryset, queryset.filter(condition)), False


def _few_sorted_alone(queryset: QuerySet, matched: QuerySet) -> QuerySet:
    """`matched`, as the rows of at most SEARCH_SORT_CAP ids when it has no more (see
    SEARCH_SORT_CAP); else as it is. PostgreSQL only: SQLite's tables are small."""
    if connections[matched.db].vendor != "postgresql":
        return matched
    ids = list(matched.order_by().values_list("pk", flat=True)[: SEARCH_SORT_CAP + 1])
    if len(ids) > SEARCH_SORT_CAP:
        return matched
    return queryset.filter(pk__in=ids)
