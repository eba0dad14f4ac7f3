"""What Brew, the demo coffee shop, sells. Plain data, free of Django, so the offline demo
model can recognise the coffees' names without touching the database."""

from __future__ import annotations

import re
from dataclasses import dataclass

# The inbox tag of a restock watch: the demo model posts it, the shop resolves it on restock.
RESTOCK_TAG = "restock_watch"


@dataclass(frozen=True, slots=True)
class CatalogueEntry:
    sku: str
    name: str
    origin: str
    notes: str
    price_cents: int
    # Bags on the shelf when the shop's table is first filled; staff change stock in the admin.
    initial_stock: int
    # Words a customer may use for it ("the Kenyan one"), lower case.
    aliases: tuple[str, ...] = ()


CATALOGUE: tuple[CatalogueEntry, ...] = (
    CatalogueEntry(
        "yirgacheffe",
        "Ethiopia Yirgacheffe",
        "Gedeo, Ethiopia",
        "jasmine, bergamot, lemon",
        1900,
        0,  # The seed's example: out of stock, so the restock watch has something to watch.
        ("yirgacheffe", "yirga", "ethiopia", "ethiopian"),
    ),
    CatalogueEntry(
        "kenya-aa",
        "Kenya AA",
        "Nyeri, Kenya",
        "blackcurrant, grapefruit, syrupy",
        2100,
        8,
        ("kenya", "kenyan"),
    ),
    CatalogueEntry(
        "colombia-huila",
        "Colombia Huila",
        "Huila, Colombia",
        "caramel, red apple, cocoa",
        1600,
        15,
        ("colombia", "colombian", "huila"),
    ),
    CatalogueEntry(
        "guatemala-antigua",
        "Guatemala Antigua",
        "Antigua, Guatemala",
        "milk chocolate, orange, almond",
        1700,
        10,
        ("guatemala", "antigua"),
    ),
    CatalogueEntry(
        "sumatra-mandheling",
        "Sumatra Mandheling",
        "North Sumatra, Indonesia",
        "cedar, dark chocolate, earthy",
        1800,
        6,
        ("sumatra", "mandheling", "indonesia"),
    ),
    CatalogueEntry(
        "house-espresso",
        "Brew House Espresso",
        "Brazil & Colombia blend",
        "hazelnut, toffee, dark cherry",
        1500,
        20,
        ("espresso", "house blend"),
    ),
)


def find_entry(text: str) -> CatalogueEntry | None:
    """The coffee a piece of text names (its sku, full name or an alias), if any."""
    # Punctuation becomes space, so "Yirgacheffe?" and "(kenya)" still match.
    lowered = " " + re.sub(r"[^a-z0-9&-]+", " ", text.lower()) + " "
    for entry in CATALOGUE:
        if entry.sku in lowered or entry.name.lower() in lowered:
            return entry
    for entry in CATALOGUE:
        if any(f" {alias}" in lowered for alias in entry.aliases):
            return entry
    return None
