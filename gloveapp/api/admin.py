"""The users admin at any size: Django's own, with the changelist of `ScaleAdmin` (estimated
or bounded counts, no facets) and its search through trigram indexes (migration 0001)."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

from gloveapp.admin_lists import ScaleAdmin

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
