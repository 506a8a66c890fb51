"""The sunglasses store: search and read inventory (LOW), purchase and return (HIGH: money moves)."""

import re
from typing import Annotated

from django.db import transaction
from django.utils import timezone
from pydantic import Field

from core.risk import Risk

from . import tables
from .registry import ToolError, tool

Quantity = Annotated[int, Field(ge=1, le=1000, description="How many pairs")]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", (text or "").lower()))


def _find_item(item: str, rows) -> object | None:
    wanted = item.strip().lower()
    for row in rows:
        if row.data["item_id"].lower() == wanted or row.data["name"].lower() == wanted:
            return row
    # "aviator sunglasses" or "Classic round" still name one item when exactly one name matches a word.
    matches = [row for row in rows if row.data["name"].lower() in _words(wanted)]
    return matches[0] if len(matches) == 1 else None


def _balance(transactions: list[dict]) -> float:
    return float(transactions[-1]["balance_after_transaction"]) if transactions else 0.0


def _next_transaction_id(transactions: list[dict]) -> str:
    numbers = [int(m.group(1)) for t in transactions if (m := re.match(r"TXN(\d+)$", t["transaction_id"]))]
    return f"TXN{(max(numbers) if numbers else 0) + 1:03d}"


def _inventory_summary(output: dict) -> str:
    items = output.get("items", []) if isinstance(output, dict) else []
    listed = ", ".join(f"{item.get('name')} (${item.get('price')}, {item.get('quantity_in_stock')} in stock)" for item in items[:8])
    more = f" and {len(items) - 8} more" if len(items) > 8 else ""
    return f"{output.get('count', len(items))} matching item(s)" + (f": {listed}{more}" if listed else "")


@tool(risk=Risk.LOW, idempotent=True, timeout_s=10, trusted_output=True, summary=_inventory_summary)
def search_inventory(
    keywords: Annotated[list[str], Field(description="Words to match in name or description, e.g. ['round']")] = [],  # noqa: B006
    min_price: Annotated[float | None, Field(ge=0)] = None,
    max_price: Annotated[float | None, Field(ge=0)] = None,
    in_stock_only: bool = True,
) -> dict:
    """Search the store inventory by keywords (whole words in name or description), price range and stock."""
    wanted = {word.lower() for keyword in keywords for word in _words(keyword)}
    items = []
    for item in tables.rows("inventory"):
        if wanted and not wanted <= _words(item["name"] + " " + item["description"]):
            continue
        if min_price is not None and item["price"] < min_price:
            continue
        if max_price is not None and item["price"] > max_price:
            continue
        if in_stock_only and item["quantity_in_stock"] <= 0:
            continue
        items.append(item)
    return {"count": len(items), "items": items}


@tool(risk=Risk.LOW, idempotent=True, timeout_s=10, trusted_output=True)
def get_item(item: Annotated[str, Field(min_length=1, max_length=100, description="Item id (SG001) or name")]) -> dict:
    """Get one inventory item by id or name, with its stock and price."""
    row = _find_item(item, tables.table("inventory").rows.all())
    if row is None:
        raise ToolError(f"No inventory item matches {item!r}.")
    return row.data


def _record_transaction(*, customer_name: str, summary: str, amount: float) -> dict:
    transactions = list(tables.locked_rows("transactions"))
    history = [row.data for row in transactions]
    entry = {
        "transaction_id": _next_transaction_id(history),
        "customer_name": customer_name,
        "transaction_summary": summary,
        "transaction_amount": round(amount, 2),
        "balance_after_transaction": round(_balance(history) + amount, 2),
        "timestamp": timezone.now().isoformat(),
    }
    tables.insert("transactions", entry)
    return entry


def _change_stock(item: str, delta: int):
    row = _find_item(item, list(tables.locked_rows("inventory")))
    if row is None:
        raise ToolError(f"No inventory item matches {item!r}.")
    stock = row.data["quantity_in_stock"] + delta
    if stock < 0:
        raise ToolError(f"Insufficient stock: {row.data['name']} has {row.data['quantity_in_stock']} left, {-delta} requested.")
    tables.save(row, {**row.data, "quantity_in_stock": stock})
    return row.data


@tool(risk=Risk.HIGH, idempotent=False, timeout_s=15, trusted_output=True)
def purchase_item(
    item: Annotated[str, Field(min_length=1, max_length=100, description="Item id (SG001) or name")],
    quantity: Quantity,
    customer_name: Annotated[str, Field(min_length=1, max_length=100)] = "Walk-in customer",
) -> dict:
    """Sell `quantity` of one item: stock goes down and one transaction row records the sale and new balance."""
    with transaction.atomic():
        data = _change_stock(item, -quantity)
        amount = data["price"] * quantity
        entry = _record_transaction(
            customer_name=customer_name, summary=f"Purchase of {quantity} x {data['name']} ({data['item_id']})", amount=amount
        )
    return {**entry, "item_id": data["item_id"], "quantity": quantity, "remaining_stock": data["quantity_in_stock"]}


@tool(risk=Risk.HIGH, idempotent=False, timeout_s=15, trusted_output=True)
def return_item(
    item: Annotated[str, Field(min_length=1, max_length=100, description="Item id (SG001) or name")],
    quantity: Quantity,
    customer_name: Annotated[str, Field(min_length=1, max_length=100)] = "Walk-in customer",
) -> dict:
    """Take back `quantity` of one item: stock goes up and one refund row lowers the balance."""
    with transaction.atomic():
        data = _change_stock(item, quantity)
        amount = -data["price"] * quantity
        entry = _record_transaction(
            customer_name=customer_name, summary=f"Return of {quantity} x {data['name']} ({data['item_id']})", amount=amount
        )
    return {**entry, "item_id": data["item_id"], "quantity": quantity, "remaining_stock": data["quantity_in_stock"]}
