"""Deadlines for decisions people owe: a plan awaiting approval and a runtime gate. Past the deadline the
item escalates (a notification to COUNTERSIGN_ESCALATION_GROUP, once); past the final deadline it ends
`expired`: the plan's status, or the gate's outcome (the step is skipped as expired, never as denied).
Run from the reconciler; every escalation and expiry is audited with its reason."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from approvals import audit
from approvals.models import AuditEvent
from execution.engine import dispatch_locked
from execution.transitions import S, step_finish
from planning import broadcast
from planning.models import Plan, PlanRevision, Step

BATCH = 200


def deadlines_enforce(now=None) -> dict:
    now = now or timezone.now()
    counts = {"escalated": 0, "expired": 0}
    for outcome in [*_plans_past_deadlines(now), *_gates_past_deadlines(now)]:
        if outcome:
            counts[outcome] += 1
    return counts


def _past(since, seconds: int, now) -> bool:
    return bool(seconds) and since is not None and since + timedelta(seconds=seconds) <= now


def _awaiting_since(plan: Plan):
    """When the current revision was put in front of approvers (proposed, edited or resubmitted)."""
    proposed = PlanRevision.objects.filter(plan=plan, number=plan.revision).aggregate(at=Max("created_at"))["at"]
    resubmitted = AuditEvent.objects.filter(plan_id=plan.pk, action="plan.resubmitted").aggregate(at=Max("created_at"))["at"]
    return max(filter(None, [proposed, resubmitted]), default=None)


def _plans_past_deadlines(now) -> list[str | None]:
    escalate_s, expire_s = settings.COUNTERSIGN_APPROVAL_DEADLINE_S, settings.COUNTERSIGN_APPROVAL_EXPIRY_S
    if not (escalate_s or expire_s):
        return []
    outcomes = []
    for plan in Plan.objects.filter(status=Plan.Status.AWAITING_APPROVAL).order_by("pk")[:BATCH]:
        since = _awaiting_since(plan)
        if _past(since, expire_s, now):
            outcomes.append(_plan_expire(plan.pk, plan.revision, expire_s))
        elif _past(since, escalate_s, now):
            outcomes.append(_escalate("plan.escalated", plan.pk, "", {"revision": plan.revision}, escalate_s, "approval"))
    return outcomes


def _gates_past_deadlines(now) -> list[str | None]:
    escalate_s, expire_s = settings.COUNTERSIGN_GATE_DEADLINE_S, settings.COUNTERSIGN_GATE_EXPIRY_S
    if not (escalate_s or expire_s):
        return []
    outcomes = []
    waiting = Step.objects.filter(status=S.WAITING_APPROVAL, plan__status=Plan.Status.RUNNING).order_by("pk")[:BATCH]
    for step in waiting:
        opened = AuditEvent.objects.filter(
            plan_id=step.plan_id, step_key=step.key, action="gate.opened", data__gate_hash=step.gate_hash
        ).aggregate(at=Max("created_at"))["at"]
        if _past(opened, expire_s, now):
            outcomes.append(_gate_expire(step.plan_id, step.key, step.gate_hash, expire_s))
        elif _past(opened, escalate_s, now):
            data = {"gate_hash": step.gate_hash}
            outcomes.append(_escalate("gate.escalated", step.plan_id, step.key, data, escalate_s, "runtime approval"))
    return outcomes


def _escalate(action: str, plan_id: int, step_key: str, data: dict, seconds: int, what: str) -> str | None:
    """Escalate once per revision or gate hash: the audit event is the record that it happened."""
    with transaction.atomic():
        if AuditEvent.objects.filter(
            action=action, plan_id=plan_id, step_key=step_key, **{f"data__{k}": v for k, v in data.items()}
        ).exists():
            return None
        group = settings.COUNTERSIGN_ESCALATION_GROUP
        reason = f"No {what} decision within {_duration(seconds)}: escalated to group {group}."
        audit.record(action=action, plan_id=plan_id, step_key=step_key, data={**data, "group": group, "reason": reason})
        broadcast.announce(plan_id, log=reason)
    return "escalated"


def _plan_expire(plan_id: int, revision: int, seconds: int) -> str | None:
    with transaction.atomic():
        plan = Plan.objects.select_for_update().get(pk=plan_id)
        if plan.status != Plan.Status.AWAITING_APPROVAL or plan.revision != revision:
            return None
        reason = f"Expired: no approval decision within {_duration(seconds)}."
        plan.status, plan.failure_reason = Plan.Status.EXPIRED, reason
        plan.save(update_fields=["status", "failure_reason", "updated_at"])
        audit.record(
            action="plan.expired", plan_id=plan.pk, data={"revision": revision, "content_hash": plan.content_hash, "reason": reason}
        )
        broadcast.announce(plan.pk, log=reason)
    return "expired"


def _gate_expire(plan_id: int, key: str, gate_hash: str, seconds: int) -> str | None:
    with transaction.atomic():
        plan = Plan.objects.select_for_update().get(pk=plan_id)
        steps = list(plan.steps.select_for_update())
        step = next((s for s in steps if s.key == key), None)
        if plan.status != Plan.Status.RUNNING or step is None or step.status != S.WAITING_APPROVAL or step.gate_hash != gate_hash:
            return None
        reason = f"Expired: no runtime approval within {_duration(seconds)}."
        audit.record(
            action="gate.expired",
            plan_id=plan.pk,
            step_key=key,
            data={"risk": step.risk, "gate_hash": gate_hash, "resolved_args": step.resolved_args, "outcome": "expired", "reason": reason},
        )
        step_finish(step, S.SKIPPED, note=reason)
        dispatch_locked(plan, steps)
    return "expired"


def _duration(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0:
        return f"{seconds // 60} min"
    return f"{seconds} s"
