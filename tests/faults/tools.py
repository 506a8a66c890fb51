"""Tools for the fault tests, with short time limits so the reconciler's deadlines come quickly. Loaded
by the test process (tests/faults/conftest.py) and by its workers (COUNTERSIGN_TOOL_MODULES)."""

import time

from core.risk import Risk
from execution.failpoints import failpoint
from sandbox.models import DataRow, DataTable
from tools.registry import ToolError, tool


def _record(label: str) -> dict:
    table, _ = DataTable.objects.get_or_create(name="test_effects", defaults={"key_field": "id"})
    row = DataRow.objects.create(table=table, key=f"{label}-{time.monotonic_ns()}", data={"label": label})
    return {"effect": row.pk}


@tool(risk=Risk.LOW, idempotent=True, timeout_s=3)
def fault_read(value: int = 1) -> int:
    """Read something: safe to run again."""
    failpoint("in_tool_call")
    return value


@tool(risk=Risk.MEDIUM, idempotent=False, timeout_s=3)
def fault_effect(label: str) -> dict:
    """Act once: the effect is recorded before the tool returns, as a payment would be made."""
    effect = _record(label)
    failpoint("in_tool_call")
    return effect


@tool(risk=Risk.HIGH, idempotent=False, timeout_s=3)
def fault_pay(label: str) -> dict:
    """An irreversible effect behind a runtime gate."""
    return _record(label)


@tool(risk=Risk.LOW, idempotent=True, timeout_s=3)
def fault_fail() -> None:
    """Fail every time, so the run ends in a replan."""
    raise ToolError("upstream unavailable")
