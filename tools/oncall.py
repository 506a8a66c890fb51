"""The on-call desk: read ticket counts and the SLA (LOW), page the on-call engineer (HIGH)."""

from typing import Annotated, Literal

from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone
from pydantic import Field

from core.risk import Risk

from . import tables
from .registry import ToolError, tool

Queue = Annotated[str, Field(min_length=1, max_length=50, description="Ticket queue, e.g. 'support'")]


def _desk_setting(name: str):
    for row in tables.rows("oncall_desk"):
        if row["setting"] == name:
            return row["value"]
    raise ToolError(f"The on-call desk has no {name!r} setting. Run `python manage.py seed_demo`.")


@tool(risk=Risk.LOW, idempotent=True, timeout_s=10, trusted_output=True)
def count_open_tickets(queue: Queue = "support") -> int:
    """Count the open tickets in a queue of the on-call desk."""
    return sum(1 for t in tables.rows("tickets") if t["queue"] == queue and t["status"] == "open")


@tool(risk=Risk.LOW, idempotent=True, timeout_s=10, trusted_output=True)
def get_sla_threshold(queue: Queue = "support") -> int:
    """The SLA threshold: the most open tickets a queue may hold before the SLA counts as breached."""
    thresholds = _desk_setting("sla_max_open_tickets")
    if queue not in thresholds:
        raise ToolError(f"No SLA threshold is set for queue {queue!r}.")
    return int(thresholds[queue])


@tool(risk=Risk.HIGH, idempotent=False, timeout_s=20, trusted_output=True)
def notify_on_call(
    message: Annotated[str, Field(min_length=1, max_length=2000)],
    severity: Literal["info", "warning", "critical"] = "warning",
) -> dict:
    """Notify the on-call engineer by email; the notification is recorded on the desk."""
    engineer = _desk_setting("on_call_engineer")
    subject = f"[{severity.upper()}] Countersign on-call notification"
    send_mail(subject, message, settings.COUNTERSIGN_ONCALL_FROM, [engineer["email"]])
    record = {
        "notification_id": f"N{timezone.now().strftime('%Y%m%d%H%M%S%f')}",
        "to": engineer["email"],
        "engineer": engineer["name"],
        "severity": severity,
        "message": message,
        "sent_at": timezone.now().isoformat(),
    }
    tables.insert("notifications", record)
    return record
