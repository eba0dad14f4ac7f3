"""The demo coffee shop in the admin: staff restock a coffee and the watching chats hear it."""

from __future__ import annotations

from django.contrib import admin, messages

from gloveapp.demo import shop
from gloveapp.demo.models import Coffee, Order
from gloveapp.lib.admin import ScaleAdmin

RESTOCK_BAGS = 12


@admin.register(Coffee)
class CoffeeAdmin(ScaleAdmin):
    list_display = ("name", "origin", "price", "stock")
    list_editable = ("stock",)
    ordering = ("position",)
    actions = ("restock_and_notify",)

    @admin.display(description="Price", ordering="price_cents")
    def price(self, coffee: Coffee) -> str:
        return shop.money(coffee.price_cents)

    def get_queryset(self, request):
        # The shelf is filled from the catalogue on first sight, here as in the chat.
        shop.catalogue_ensure()
        return super().get_queryset(request)

    def save_model(self, request, obj, form, change):
        # Stock goes through the shop's service, so restock watchers are told (an edit in
        # the list's stock column is a restock too); any other changed field saves as usual.
        if not change or "stock" not in form.changed_data:
            super().save_model(request, obj, form, change)
            return
        others = [name for name in form.changed_data if name != "stock"]
        if others:
            obj.save(update_fields=others)
        shop.coffee_stock_set(sku=obj.pk, stock=obj.stock, user=request.user)

    @admin.action(description=f"Restock {RESTOCK_BAGS} bags and notify restock watchers")
    def restock_and_notify(self, request, queryset):
        notified = 0
        for coffee in queryset:
            notified += len(
                shop.coffee_restock(sku=coffee.sku, bags=RESTOCK_BAGS, user=request.user)
            )
        self.message_user(
            request,
            f"Restocked {queryset.count()} coffee(s); {notified} restock watch(es) resolved.",
            messages.SUCCESS,
        )


@admin.register(Order)
class OrderAdmin(ScaleAdmin):
    list_display = ("__str__", "session_id", "total", "payment", "created_at")
    # Newest first on `order_created_idx` (created_at, id).
    ordering = ("-created_at", "-id")
    sortable_by = ("created_at",)
    list_filter = ("payment",)
    search_exact = ("id", "session_id")
    search_help_text = "An order's number or an exact session id."
    # Orders are records: every field read-only, the total shown as money.
    fields = readonly_fields = ("session", "lines", "total", "payment", "created_at")

    @admin.display(description="Total")
    def total(self, order: Order) -> str:
        return shop.money(order.total_cents)

    def has_add_permission(self, request):
        return False
