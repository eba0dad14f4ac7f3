"""Every write to the demo coffee shop: cart, orders, restocks. The coffee tools, the admin
and the demo set-up call these; each runs in one transaction and refuses what the shelf
cannot cover."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F

from gloveapp.core.store import InboxTransitionError
from gloveapp.demo.catalogue import CATALOGUE, RESTOCK_TAG, find_entry
from gloveapp.demo.models import CartLine, Coffee, Order
from inbox.models import InboxItem
from inbox.services import inbox_item_resolve


class ShopError(Exception):
    """A request the shop refuses, with a message meant for the customer."""


class UnknownCoffee(ShopError):
    def __init__(self, name: str) -> None:
        known = ", ".join(entry.name for entry in CATALOGUE)
        super().__init__(f'We don\'t sell a coffee called "{name}". We have: {known}.')


class OutOfStock(ShopError):
    def __init__(self, coffee: Coffee, wanted: int | None = None) -> None:
        self.coffee = coffee
        if coffee.stock == 0 or wanted is None:
            message = f"{coffee.name} is out of stock."
        else:
            message = f"Only {coffee.stock} bag(s) of {coffee.name} left; you asked for {wanted}."
        super().__init__(message)


class EmptyCart(ShopError):
    def __init__(self) -> None:
        super().__init__("Your cart is empty: add a coffee first.")


def money(cents: int) -> str:
    return f"${cents / 100:.2f}"


# -- catalogue ---------------------------------------------------------------------------------
def catalogue_ensure() -> None:
    """Fill in missing coffees from the catalogue; existing rows (and staff's stock) stay."""
    Coffee.objects.bulk_create(
        [
            Coffee(
                sku=entry.sku,
                name=entry.name,
                origin=entry.origin,
                notes=entry.notes,
                price_cents=entry.price_cents,
                stock=entry.initial_stock,
                position=position,
            )
            for position, entry in enumerate(CATALOGUE)
        ],
        ignore_conflicts=True,
    )


def coffee_list() -> list[Coffee]:
    catalogue_ensure()
    return list(Coffee.objects.all())


def coffee_find(name: str) -> Coffee:
    """The coffee `name` means (full name, sku or a customer's word for it)."""
    catalogue_ensure()
    coffee = Coffee.objects.filter(name__iexact=name.strip()).first()
    if coffee is None:
        entry = find_entry(name)
        coffee = Coffee.objects.filter(pk=entry.sku).first() if entry else None
    if coffee is None:
        raise UnknownCoffee(name)
    return coffee


def coffee_data(coffee: Coffee) -> dict[str, Any]:
    return {
        "sku": coffee.sku,
        "name": coffee.name,
        "origin": coffee.origin,
        "notes": coffee.notes,
        "price_cents": coffee.price_cents,
        "price": money(coffee.price_cents),
        "bags": coffee.stock,
        "in_stock": coffee.in_stock,
    }


# -- cart ------------------------------------------------------------------------------------
def cart_summary(*, session_id: str) -> dict[str, Any]:
    lines = [
        {
            "sku": line.coffee.sku,
            "name": line.coffee.name,
            "quantity": line.quantity,
            "price_cents": line.coffee.price_cents,
            "line_total_cents": line.quantity * line.coffee.price_cents,
        }
        for line in CartLine.objects.filter(session_id=session_id).select_related("coffee")
    ]
    total = sum(line["line_total_cents"] for line in lines)
    return {
        "lines": lines,
        "count": sum(line["quantity"] for line in lines),
        "total_cents": total,
        "total": money(total),
    }


def cart_add(*, session_id: str, coffee_name: str, quantity: int = 1) -> dict[str, Any]:
    """Put `quantity` bags in the session's cart; refuses more than the shelf holds."""
    if quantity < 1:
        raise ShopError("Add at least one bag.")
    coffee = coffee_find(coffee_name)
    with transaction.atomic():
        line, _ = CartLine.objects.get_or_create(
            session_id=session_id, coffee=coffee, defaults={"quantity": 0}
        )
        wanted = line.quantity + quantity
        if wanted > coffee.stock:
            raise OutOfStock(coffee, wanted)
        CartLine.objects.filter(pk=line.pk).update(quantity=F("quantity") + quantity)
    return {
        "added": {"sku": coffee.sku, "name": coffee.name, "quantity": quantity},
        "cart": cart_summary(session_id=session_id),
    }


# -- orders ----------------------------------------------------------------------------------
def cart_set_quantities(*, session_id: str, lines: list[dict[str, Any]]) -> dict[str, Any]:
    """Set the quantity of coffees already in the cart (what an approved, perhaps edited,
    checkout names); 0 takes a coffee out. Coffees not in the cart are left out: a checkout
    never fills an emptied cart again."""
    with transaction.atomic():
        for line in lines:
            coffee = coffee_find(str(line.get("coffee") or ""))
            quantity = int(line.get("quantity") or 0)
            if quantity < 0:
                raise ShopError("A quantity cannot be negative.")
            if quantity > coffee.stock:
                raise OutOfStock(coffee, quantity)
            held = CartLine.objects.filter(session_id=session_id, coffee=coffee)
            if quantity == 0:
                held.delete()
            else:
                held.update(quantity=quantity)
    return cart_summary(session_id=session_id)


def order_place(*, session_id: str, payment: str) -> Order:
    """Turn the cart into an order: take the bags off the shelf, empty the cart."""
    if payment not in Order.Payment.values:
        raise ShopError(f"Unknown payment method {payment!r}.")
    with transaction.atomic():
        lines = list(
            CartLine.objects.filter(session_id=session_id).select_related("coffee").order_by("pk")
        )
        if not lines:
            raise EmptyCart()
        for line in lines:
            # Race: another session may buy the last bags while this customer was reading
            # the confirmation. The stock condition in the UPDATE decides; 0 rows = too late.
            taken = Coffee.objects.filter(pk=line.coffee_id, stock__gte=line.quantity).update(
                stock=F("stock") - line.quantity
            )
            if taken != 1:
                line.coffee.refresh_from_db()
                raise OutOfStock(line.coffee, line.quantity)
        snapshot = [
            {
                "sku": line.coffee.sku,
                "name": line.coffee.name,
                "quantity": line.quantity,
                "price_cents": line.coffee.price_cents,
            }
            for line in lines
        ]
        order = Order.objects.create(
            session_id=session_id,
            lines=snapshot,
            total_cents=sum(line["quantity"] * line["price_cents"] for line in snapshot),
            payment=payment,
        )
        CartLine.objects.filter(pk__in=[line.pk for line in lines]).delete()
    return order


def order_data(order: Order) -> dict[str, Any]:
    return {
        "status": "placed",
        "order_number": order.pk,
        "lines": order.lines,
        "total_cents": order.total_cents,
        "total": money(order.total_cents),
        "payment": order.payment,
    }


# -- restock ---------------------------------------------------------------------------------
def coffee_restock(*, sku: str, bags: int, user: Any = None) -> list[InboxItem]:
    """Put `bags` more bags on the shelf and answer every pending restock watch for it.

    Staff call this from the admin ("Restock and notify watchers"): the watching chats then
    hear the news on their next turn, through the inbox.
    """
    if bags < 1:
        raise ShopError("Restock at least one bag.")
    catalogue_ensure()
    with transaction.atomic():
        updated = Coffee.objects.filter(pk=sku).update(stock=F("stock") + bags)
        if updated != 1:
            raise UnknownCoffee(sku)
        coffee = Coffee.objects.get(pk=sku)
    return _tell_restock_watchers(coffee, user=user)


def coffee_stock_set(*, sku: str, stock: int, user: Any = None) -> list[InboxItem]:
    """Set the shelf to `stock` bags (the admin's editable stock column).

    When that puts bags on the shelf, the restock watchers hear it exactly as after
    `coffee_restock`: an edit in the list must not bypass them.
    """
    if stock < 0:
        raise ShopError("Stock cannot be negative.")
    catalogue_ensure()
    with transaction.atomic():
        coffee = Coffee.objects.select_for_update().filter(pk=sku).first()
        if coffee is None:
            raise UnknownCoffee(sku)
        added = stock - coffee.stock
        coffee.stock = stock
        coffee.save(update_fields=["stock"])
    return _tell_restock_watchers(coffee, user=user) if added > 0 else []


def _tell_restock_watchers(coffee: Coffee, *, user: Any) -> list[InboxItem]:
    """Answer every pending restock watch for `coffee` (each in its own transaction)."""
    resolved = []
    watches = InboxItem.objects.filter(tag=RESTOCK_TAG, status=InboxItem.Status.PENDING)
    for item in watches:
        entry = find_entry(item.request)
        if entry is None or entry.sku != coffee.sku:
            continue
        response = f"{coffee.name} is back in stock ({coffee.stock} bags)."
        try:
            resolved.append(
                inbox_item_resolve(
                    item_id=item.pk,
                    response=response,
                    resolved_by="user" if user else "api",
                    user=user,
                )
            )
        except InboxTransitionError:
            # Someone resolved this watch between our read and our update: theirs stands.
            continue
    return resolved
