"""The audit trail: every proposal, edit, decision and action is recorded here, hash-chained."""

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from project.canonical import sha256_of

from .models import AuditEvent, AuditHead

SYSTEM_ACTOR = "system"


def event_hash(*, seq: int, created_at: str, actor_name: str, action: str, plan_id, step_key: str, data, prev_hash: str) -> str:
    return sha256_of(
        {
            "seq": seq,
            "created_at": created_at,
            "actor": actor_name,
            "action": action,
            "plan_id": plan_id,
            "step_key": step_key,
            "data": data,
            "prev_hash": prev_hash,
        }
    )


def record(*, action: str, actor=None, plan_id: int | None = None, step_key: str = "", data: dict | None = None) -> AuditEvent:
    """Append one event. Runs inside the caller's transaction, so the event commits or rolls back with
    the change it describes."""
    data = data or {}
    actor_name = actor.get_username() if actor is not None else SYSTEM_ACTOR
    with transaction.atomic():
        AuditHead.objects.get_or_create(pk=1)
        # Updating the head row first takes its row lock (PostgreSQL) or the write lock (SQLite) before
        # anything is read, so concurrent writers line up and the chain never forks.
        AuditHead.objects.filter(pk=1).update(seq=F("seq") + 1)
        head = AuditHead.objects.get(pk=1)
        created_at = timezone.now()
        digest = event_hash(
            seq=head.seq,
            created_at=created_at.isoformat(),
            actor_name=actor_name,
            action=action,
            plan_id=plan_id,
            step_key=step_key,
            data=data,
            prev_hash=head.hash,
        )
        event = AuditEvent.objects.create(
            seq=head.seq,
            created_at=created_at,
            actor=actor,
            actor_name=actor_name,
            action=action,
            plan_id=plan_id,
            step_key=step_key,
            data=data,
            prev_hash=head.hash,
            hash=digest,
        )
        AuditHead.objects.filter(pk=1).update(hash=digest)
    return event


def verify() -> dict:
    """Walk the chain in seq order; report the first event whose link or content does not check out."""
    prev_hash = "0" * 64
    expected_seq = 1
    count = 0
    for event in AuditEvent.objects.order_by("seq").iterator(chunk_size=2000):
        count += 1
        digest = event_hash(
            seq=event.seq,
            created_at=event.created_at.isoformat(),
            actor_name=event.actor_name,
            action=event.action,
            plan_id=event.plan_id,
            step_key=event.step_key,
            data=event.data,
            prev_hash=event.prev_hash,
        )
        if event.seq != expected_seq or event.prev_hash != prev_hash or event.hash != digest:
            return {"ok": False, "events": count, "first_bad": event.seq}
        prev_hash = event.hash
        expected_seq += 1
    return {"ok": True, "events": count, "first_bad": None}
