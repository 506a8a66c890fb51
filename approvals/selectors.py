"""Reads over the audit trail: filtered history, streamed exports."""

import csv
import io
import json
from datetime import datetime, time

from django.db.models import Q, TextField
from django.db.models.functions import Cast
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from approvals.models import AuditEvent

EXPORT_FIELDS = ["seq", "created_at", "actor", "action", "plan_id", "step_key", "data", "prev_hash", "hash"]


def _moment(value: str | None, *, end: bool = False):
    if not value:
        return None
    moment = parse_datetime(value)
    if moment is None:
        day = parse_date(value)
        if day is None:
            raise ValueError(f"{value!r} is not a date (YYYY-MM-DD) or a date and time")
        moment = datetime.combine(day, time.max if end else time.min)
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment)


def audit_events(*, plan=None, actor=None, action=None, risk=None, since=None, until=None, q=None):
    """Events matching the filters, oldest first. Raises ValueError for an unreadable date."""
    events = AuditEvent.objects.all()
    if plan:
        events = events.filter(plan_id=int(plan))
    if actor:
        events = events.filter(actor_name=actor)
    if action:
        events = events.filter(action__startswith=action) if action.endswith(".") else events.filter(action=action)
    if risk:
        events = events.filter(data__risk=risk)
    if (start := _moment(since)) is not None:
        events = events.filter(created_at__gte=start)
    if (end := _moment(until, end=True)) is not None:
        events = events.filter(created_at__lte=end)
    if q:
        events = events.annotate(data_text=Cast("data", TextField())).filter(
            Q(action__icontains=q) | Q(actor_name__icontains=q) | Q(step_key__iexact=q) | Q(data_text__icontains=q)
        )
    return events.order_by("seq")


def facets() -> dict:
    return {
        # order_by clears the model's ordering by seq, which would otherwise make every event distinct.
        "actions": list(AuditEvent.objects.order_by("action").values_list("action", flat=True).distinct()),
        "actors": sorted(set(AuditEvent.objects.values_list("actor_name", flat=True).distinct()) | {"system"}),
    }


def _row(event: AuditEvent) -> dict:
    return {
        "seq": event.seq,
        "created_at": event.created_at.isoformat(),
        "actor": event.actor_name,
        "action": event.action,
        "plan_id": event.plan_id,
        "step_key": event.step_key,
        "data": event.data,
        "prev_hash": event.prev_hash,
        "hash": event.hash,
    }


def stream_json(events):
    """A JSON array, produced a chunk at a time so a large range never sits in memory."""
    yield "["
    first = True
    for event in events.iterator(chunk_size=1000):
        yield ("" if first else ",\n") + json.dumps(_row(event), ensure_ascii=False, default=str)
        first = False
    yield "]\n"


def stream_csv(events):
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(EXPORT_FIELDS)
    yield buffer.getvalue()
    for event in events.iterator(chunk_size=1000):
        buffer.seek(0)
        buffer.truncate()
        row = _row(event)
        writer.writerow([json.dumps(row[f], ensure_ascii=False, default=str) if f == "data" else row[f] for f in EXPORT_FIELDS])
        yield buffer.getvalue()
