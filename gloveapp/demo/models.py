"""The demo coffee shop's state: stock, each session's cart, and placed orders.

The catalogue's names and prices live in code (`catalogue.py`); the rows here are filled from
it on first use (`shop.catalogue_ensure`), so staff can change stock in the admin and tests
that flush the database get a fresh shop. Carts and orders hang off the conversation session:
a cart survives reloads, restarts and other server processes, and goes when the session goes.
"""

from __future__ import annotations

from django.db import models


class Coffee(models.Model):
    sku = models.CharField(primary_key=True, max_length=50)
    name = models.CharField(max_length=100)
    origin = models.CharField(max_length=100, blank=True, default="")
    notes = models.CharField(max_length=200, blank=True, default="")
    price_cents = models.PositiveIntegerField()
    stock = models.PositiveIntegerField(default=0, help_text="Bags on the shelf.")
    position = models.PositiveIntegerField(default=0)

    class Meta:
        # Tables keep their names from when the shop lived in the agents app.
        db_table = "agents_coffee"
        ordering = ["position", "sku"]
        verbose_name_plural = "coffees"

    def __str__(self) -> str:
        return self.name

    @property
    def in_stock(self) -> bool:
        return self.stock > 0


class CartLine(models.Model):
    session = models.ForeignKey(
        "conversations.Session", on_delete=models.CASCADE, related_name="coffee_cart_lines"
    )
    coffee = models.ForeignKey(Coffee, on_delete=models.CASCADE, related_name="+")
    quantity = models.PositiveIntegerField(default=1)
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "agents_cartline"
        ordering = ["added_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["session", "coffee"], name="cartline_unique_coffee"),
        ]

    def __str__(self) -> str:
        return f"{self.quantity} x {self.coffee_id}"


class Order(models.Model):
    class Payment(models.TextChoices):
        SAVED_CARD = "saved_card", "saved card"
        PICKUP = "pickup", "pay at pickup"

    session = models.ForeignKey(
        "conversations.Session", on_delete=models.CASCADE, related_name="coffee_orders"
    )
    # What was bought at the price of the day: [{sku, name, quantity, price_cents}].
    lines = models.JSONField(default=list)
    total_cents = models.PositiveIntegerField()
    payment = models.CharField(max_length=20, choices=Payment.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "agents_order"
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["created_at", "id"], name="order_created_idx"),
            # The admin's payment filter, newest first.
            models.Index(fields=["payment", "created_at", "id"], name="order_payment_idx"),
        ]

    def __str__(self) -> str:
        return f"Order #{self.pk}"
