"""The audit trail: every proposal, edit, decision and action is recorded here, hash-chained."""

import hashlib
import hmac

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from core.canonical import json_as_stored, sha256_of

from . import notifications
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


def _advance_head() -> AuditHead | None:
    table = connection.ops.quote_name(AuditHead._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET seq = seq + 1 WHERE id = 1 RETURNING seq, hash")  # noqa: S608 - our table name
        row = cursor.fetchone()
    return AuditHead(pk=1, seq=row[0], hash=row[1]) if row else None


_COLUMNS = ["seq", "created_at", "actor", "actor_name", "action", "plan_id", "step_key", "data", "prev_hash", "hash"]


def _insert_and_move_head(event: AuditEvent) -> None:
    """Store the event and point the head at it. On PostgreSQL one statement does both (a data-modifying
    CTE), so an append costs two round trips: advance the head, then this."""
    if connection.vendor != "postgresql":
        event.save(force_insert=True)
        AuditHead.objects.filter(pk=1).update(hash=event.hash)
        return
    fields = [AuditEvent._meta.get_field(name) for name in _COLUMNS]
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    values = [field.get_db_prep_save(getattr(event, field.attname), connection) for field in fields]
    events, heads = (connection.ops.quote_name(model._meta.db_table) for model in (AuditEvent, AuditHead))
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH appended AS (INSERT INTO {events} ({columns}) VALUES ({', '.join(['%s'] * len(values))}) RETURNING id, hash) "  # noqa: S608 - our tables and columns
            f"UPDATE {heads} SET hash = appended.hash FROM appended WHERE {heads}.id = 1 RETURNING appended.id",
            values,
        )
        event.pk = cursor.fetchone()[0]
    event._state.adding, event._state.db = False, connection.alias


def record(*, action: str, actor=None, plan_id: int | None = None, step_key: str = "", data: dict | None = None) -> AuditEvent:
    """Append one event. Runs inside the caller's transaction, so the event commits or rolls back with
    the change it describes. `data` is stored, and hashed, as jsonb will give it back (numbers
    normalised), so verify() recomputes the same hash from the row."""
    data = json_as_stored(data or {})
    actor_name = actor.get_username() if actor is not None else SYSTEM_ACTOR
    # No savepoint (two round trips each): an error here must roll back the caller's change as well.
    with transaction.atomic(savepoint=False):
        # Updating the head row first takes its row lock (PostgreSQL) or the write lock (SQLite) before
        # anything is read, so concurrent writers line up and the chain never forks.
        # One round trip: advance the sequence and read the tip (RETURNING: PostgreSQL, SQLite >= 3.35).
        head = _advance_head()
        if head is None:
            AuditHead.objects.get_or_create(pk=1)
            head = _advance_head()
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
        event = AuditEvent(
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
        _insert_and_move_head(event)
        notifications.on_audit_event(event)
    return event


def _expected_hash(event: AuditEvent) -> str:
    return event_hash(
        seq=event.seq,
        created_at=event.created_at.isoformat(),
        actor_name=event.actor_name,
        action=event.action,
        plan_id=event.plan_id,
        step_key=event.step_key,
        data=event.data,
        prev_hash=event.prev_hash,
    )


def verify(*, head: dict | None = None) -> dict:
    """Walk the chain in seq order and report the first event that does not check out: a changed row
    (its hash), a deleted one (the missing seq) or reordered ones (a broken link). With a saved `head`
    (from `export_head`), a truncated tail is reported too."""
    prev_hash = "0" * 64
    expected_seq = 1
    count = 0
    last_hash = prev_hash
    for event in AuditEvent.objects.order_by("seq").iterator(chunk_size=2000):
        count += 1
        if event.seq != expected_seq:
            return {"ok": False, "events": count, "first_bad": expected_seq, "reason": f"event #{expected_seq} is missing"}
        if event.prev_hash != prev_hash:
            return {
                "ok": False,
                "events": count,
                "first_bad": event.seq,
                "reason": f"event #{event.seq} does not link to the event before it",
            }
        if event.hash != _expected_hash(event):
            return {"ok": False, "events": count, "first_bad": event.seq, "reason": f"event #{event.seq} was changed after it was written"}
        prev_hash = last_hash = event.hash
        expected_seq += 1
    if head is not None:
        problem = _check_head(head, count, last_hash)
        if problem:
            return {"ok": False, "events": count, "first_bad": problem[0], "reason": problem[1]}
    return {"ok": True, "events": count, "first_bad": None, "reason": ""}


def _mac(seq: int, digest: str) -> str:
    key = (settings.COUNTERSIGN_AUDIT_HMAC_KEY or settings.SECRET_KEY).encode()
    return hmac.new(key, f"{seq}:{digest}".encode(), hashlib.sha256).hexdigest()


def export_head() -> dict:
    """The chain's head, signed: keep it somewhere else, and `verify(head=...)` later detects a tail
    that was cut off or rewritten."""
    last = AuditEvent.objects.order_by("-seq").first()
    seq, digest = (last.seq, last.hash) if last else (0, "0" * 64)
    return {"seq": seq, "hash": digest, "mac": _mac(seq, digest), "exported_at": timezone.now().isoformat()}


def _check_head(head: dict, count: int, last_hash: str) -> tuple[int, str] | None:
    try:
        seq, digest, mac = int(head["seq"]), str(head["hash"]), str(head["mac"])
    except (KeyError, TypeError, ValueError):
        return 0, "the saved head is not a head export"
    if not hmac.compare_digest(mac, _mac(seq, digest)):
        return seq, "the saved head's signature does not match (wrong key, or the head was edited)"
    if count < seq:
        return count + 1, f"the trail ends at #{count} but the saved head is #{seq}: events were removed from the end"
    at = AuditEvent.objects.filter(seq=seq).values_list("hash", flat=True).first() if seq else "0" * 64
    if at != digest:
        return seq, f"event #{seq} differs from the saved head"
    return None
