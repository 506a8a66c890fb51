"""Tools that exist only for tests: loaded in the test process by conftest and in worker subprocesses
through COUNTERSIGN_TOOL_MODULES=tests.tools (the same mechanism an organisation uses for its own tools)."""

import time
from typing import Annotated

from pydantic import Field

from core.risk import Risk
from sandbox.models import DataRow, DataTable
from tools.registry import ToolError, tool

Seconds = Annotated[float, Field(ge=0, le=60)]


def _effects():
    table, _ = DataTable.objects.get_or_create(name="test_effects", defaults={"key_field": "id"})
    return table


def effects(label: str | None = None) -> list[dict]:
    rows = [row.data for row in DataRow.objects.filter(table__name="test_effects").order_by("id")]
    return [row for row in rows if label is None or row["label"] == label]


@tool(risk=Risk.LOW, idempotent=True, timeout_s=30, trusted_output=True)
def sleep_io(seconds: Seconds, label: str = "") -> dict:
    """Wait like an I/O call would."""
    time.sleep(seconds)
    return {"label": label, "slept": seconds}


@tool(risk=Risk.LOW, idempotent=True, timeout_s=10, trusted_output=True)
def noop(value: int = 1) -> int:
    """Return the value."""
    return value


@tool(risk=Risk.MEDIUM, idempotent=False, timeout_s=60, trusted_output=True)
def record_effect(label: str, seconds: Seconds = 0) -> dict:
    """Record a side effect, then take a while: the row shows how many times it really ran."""
    table = _effects()
    row = DataRow.objects.create(table=table, key=f"{label}-{time.monotonic_ns()}", data={"label": label})
    time.sleep(seconds)
    return {"effect": row.pk}


@tool(risk=Risk.HIGH, idempotent=False, timeout_s=30, trusted_output=True)
def high_effect(label: str) -> dict:
    """A side effect that needs a runtime approval."""
    row = DataRow.objects.create(table=_effects(), key=f"{label}-{time.monotonic_ns()}", data={"label": label})
    return {"effect": row.pk}


@tool(risk=Risk.LOW, idempotent=True, timeout_s=10, trusted_output=True)
def always_fail(message: str = "upstream unavailable") -> None:
    """Fail every time."""
    raise ToolError(message)


@tool(risk=Risk.LOW, idempotent=True, timeout_s=1, trusted_output=True)
def too_slow(seconds: Seconds = 5) -> None:
    """Take longer than its own timeout."""
    time.sleep(seconds)


@tool(risk=Risk.LOW, idempotent=True, timeout_s=10, trusted_output=True)
def long_report(finding: str = "3 refunds are overdue", padding: int = 2000) -> str:
    """Write a long report whose one finding is buried at its end (for the facts ledger)."""
    return "Routine line. " * (padding // 14) + f"FINDING: {finding}."
