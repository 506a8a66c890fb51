"""Named failpoints: the places in execution where a process can die or lose its database, so the fault
tests (tests/faults) can put a real worker exactly there.

Inert unless COUNTERSIGN_FAILPOINTS names the point: `after_claim=crash` (the process exits at once, as
if killed) or `after_claim=db_drop` (the database connection is closed under the code and an
OperationalError raised). Only the fault tests set it, in the environment of the processes they start.
With COUNTERSIGN_FAILPOINT_MARKER set to a path, a failpoint fires once: the first process to get there
creates the file (so the test knows the fault happened) and every later arrival passes.
"""

import os

from django.db import OperationalError, connection

POINTS = {
    "after_claim",
    "after_attempt_row",
    "in_tool_call",
    "after_tool_returns",
    "after_finish",
    "during_dispatch",
    "during_gate_decision",
    "during_replan",
    "during_answer",
}


def _armed() -> dict[str, str]:
    spec = os.environ.get("COUNTERSIGN_FAILPOINTS", "")
    return dict(item.split("=", 1) for item in spec.split(",") if "=" in item)


def _first_arrival() -> bool:
    marker = os.environ.get("COUNTERSIGN_FAILPOINT_MARKER")
    if not marker:
        return True
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def failpoint(name: str) -> None:
    assert name in POINTS, f"unknown failpoint {name}"
    action = _armed().get(name)
    if action is None or not _first_arrival():
        return
    if action == "crash":
        os._exit(1)
    if action == "db_drop":
        connection.close()
        raise OperationalError(f"failpoint {name}: the database connection dropped")
    raise ValueError(f"failpoint {name}: unknown action {action!r}")
