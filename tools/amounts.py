"""Estimated amounts of money a call moves, for approval policies (`resource.amount`). A tool declares an
estimator here; a call whose arguments are not known yet (templates) or not numbers has no estimate."""

from collections.abc import Callable

from tools.registry import ToolError
from tools.store import get_item

ESTIMATORS: dict[str, Callable[[dict], float | None]] = {}


def estimates(tool_name: str):
    def register(func: Callable[[dict], float | None]):
        ESTIMATORS[tool_name] = func
        return func

    return register


def estimated_amount(tool_name: str, args: dict) -> float | None:
    estimator = ESTIMATORS.get(tool_name)
    if estimator is not None:
        return estimator(args)
    explicit = args.get("amount")
    return float(explicit) if isinstance(explicit, int | float) and not isinstance(explicit, bool) else None


@estimates("purchase_item")
@estimates("return_item")
def _sale_amount(args: dict) -> float | None:
    """quantity x the item's price in the inventory table (what a sale takes in or a return pays back)."""
    quantity, item = args.get("quantity"), args.get("item")
    if not isinstance(quantity, int) or not isinstance(item, str):
        return None
    try:
        return float(get_item(item)["price"]) * quantity
    except ToolError:
        return None
