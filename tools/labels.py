"""Display labels for argument values: what a person reads beside a raw value at a gate, so "SG005" shows
as "SG005 — Aviator, 89.00 each, 12 in stock". A tool declares a labeller per argument here; a value with
no label (unknown id, a template not resolved yet) shows raw, and a labeller never decides anything."""

from collections.abc import Callable

from tools.registry import ToolError
from tools.store import get_item

LABELLERS: dict[tuple[str, str], Callable[[object], str | None]] = {}


def labels(*tool_names: str, arg: str):
    def register(func: Callable[[object], str | None]):
        for name in tool_names:
            LABELLERS[(name, arg)] = func
        return func

    return register


def argument_labels(tool_name: str, args: dict | None) -> dict[str, str]:
    """{argument: label} for the arguments of this call that have one."""
    found = {}
    for name, value in (args or {}).items():
        labeller = LABELLERS.get((tool_name, name))
        label = labeller(value) if labeller is not None else None
        if label:
            found[name] = label
    return found


@labels("get_item", "purchase_item", "return_item", arg="item")
def _item_label(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        item = get_item(value)
    except ToolError:
        return None
    return f"{item['name']} ({item['item_id']}), {item['price']} each, {item['quantity_in_stock']} in stock"
