"""The users admin at any size: Django's own, with the changelist of `ScaleAdmin` (estimated
or bounded counts, no facets), its search through trigram indexes (`glove_user_*_trgm_idx`)
and its filters through partial indexes (`glove_user_staff_idx`, `glove_user_superuser_idx`,
`glove_user_inactive_idx`); DRF's API tokens and django-axes' records of logins the same
way."""

from __future__ import annotations

from django.apps import apps
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from rest_framework.authtoken.admin import TokenAdmin
from rest_framework.authtoken.models import TokenProxy

from gloveapp.lib.admin import ScaleAdmin

User = get_user_model()

# A project with its own user model registers its own admin; only Django's is replaced here.
if admin.site.is_registered(User) and User._meta.label == "auth.User":
    admin.site.unregister(User)

    @admin.register(User)
    class ScaleUserAdmin(ScaleAdmin, UserAdmin):
        # What Django's searches (`%term%` in each), through an index on PostgreSQL.
        search_text = ("username", "first_name", "last_name", "email")
        search_fields = ()
        # Sorted by username (its unique index) unless staff pick another column.
        sortable_by = ("username",)


# DRF's token admin, bounded: its list ordered on the indexed one-to-one key (Django's
# sorted by a joined username: a sort of every token), no date filter (a DISTINCT of the
# dates), a search by exact username, and a box for the user on the change page (Django's
# select listed every user: 410 kB at 10,000 users).
if admin.site.is_registered(TokenProxy):
    admin.site.unregister(TokenProxy)


@admin.register(TokenProxy)
class ScaleTokenAdmin(ScaleAdmin, TokenAdmin):
    raw_id_fields = ("user",)
    list_filter = ()
    ordering = ("user",)
    sortable_by = ()
    search_fields = ()
    search_usernames = ("user",)
    search_help_text = "A user's exact username."


class ScaleLoginRecords(ScaleAdmin):
    """django-axes' lists, bounded: newest first through the time index
    (`glove_axes_*_time_idx`; axes' own sorted the table), found by an exact username or address (both indexed; axes
    searched `%term%` in four columns), no date hierarchy and no filters (each a `SELECT
    DISTINCT` over the table, or a walk of it for a rare value)."""

    ordering = ("-attempt_time",)
    sortable_by = ()
    list_filter = ()
    search_fields = ()
    search_exact = ("username", "ip_address")
    search_help_text = "An exact username or IP address."


def _login_records_admins() -> None:
    """axes' admins replaced (a project that installs the apps without axes has none)."""
    import axes.admin  # registers axes' admins (if AXES_ENABLE_ADMIN), replaced here
    from axes.models import AccessAttempt, AccessFailureLog, AccessLog

    for model, axes_admin in (
        (AccessAttempt, axes.admin.AccessAttemptAdmin),
        (AccessLog, axes.admin.AccessLogAdmin),
        (AccessFailureLog, axes.admin.AccessFailureLogAdmin),
    ):
        if admin.site.is_registered(model):
            admin.site.unregister(model)
            extra = {"list_select_related": ("expiration",)} if model is AccessAttempt else {}
            admin.site.register(
                model, type(f"Scale{axes_admin.__name__}", (ScaleLoginRecords, axes_admin), extra)
            )


if apps.is_installed("axes"):
    _login_records_admins()
