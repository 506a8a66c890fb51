"""People deciding at run time: answering a runtime gate, and resolving an interrupted step."""

from django.db import transaction

from approvals import audit
from approvals.models import Approval
from approvals.policy import four_eyes_violation
from core.errors import ServiceError
from core.roles import user_can
from execution.engine import dispatch_locked, step_enqueue
from execution.transitions import S, step_finish
from planning.models import Plan, Step


def gate_answer(*, plan_id: int, key: str, actor, approve: bool, comment: str = "", gate_hash: str | None = None) -> Step:
    """Approve or deny a step waiting at its runtime gate, bound to the gate hash the approver saw."""
    if not user_can(actor, "approve"):
        raise ServiceError("Only approvers can decide gates.", status=403)
    with transaction.atomic():
        plan = Plan.objects.select_for_update().select_related("goal").get(pk=plan_id)
        # All step locks are taken now, before the audit head's lock (taken by audit.record): a later
        # step lock while holding the head could deadlock with a worker finishing a step.
        steps = list(plan.steps.select_for_update())
        step = next((s for s in steps if s.key == key), None)
        if step is None:
            raise ServiceError(f"This plan has no step {key!r}.", status=404)
        if plan.status != Plan.Status.RUNNING or step.status != S.WAITING_APPROVAL:
            raise ServiceError(f"Step {key} is not waiting for approval.", status=409)
        if gate_hash is not None and gate_hash != step.gate_hash:
            raise ServiceError("The arguments you saw are not the ones waiting; reload the plan.", status=409)
        authors = set(plan.revisions.filter(author__isnull=False).values_list("author_id", flat=True))
        blocked = four_eyes_violation(approver=actor, author_ids=authors, requester_id=plan.goal.requester_id)
        if blocked:
            raise ServiceError(blocked, status=403)
        Approval.objects.create(
            plan=plan,
            step=step,
            kind=Approval.Kind.GATE,
            decision=Approval.Decision.APPROVED if approve else Approval.Decision.REJECTED,
            comment=(comment or "")[:5000],
            approver=actor,
            revision=plan.revision,
            content_hash=step.gate_hash,
        )
        audit.record(
            action="gate.approved" if approve else "gate.denied",
            actor=actor,
            plan_id=plan.pk,
            step_key=key,
            data={"risk": step.risk, "gate_hash": step.gate_hash, "resolved_args": step.resolved_args, "comment": comment[:5000]},
        )
        if approve:
            step_enqueue(step)
        else:
            step_finish(step, S.SKIPPED, note=f"Denied by {actor.get_username()}" + (f": {comment}" if comment else "."))
            dispatch_locked(plan, steps)
    return step


def interrupted_step_resolve(*, plan_id: int, key: str, actor, retry: bool) -> Step:
    """A person decides what happens to an interrupted step: run it again, or skip it."""
    if not user_can(actor, "run"):
        raise ServiceError("Only operators can retry or skip interrupted steps.", status=403)
    with transaction.atomic():
        plan = Plan.objects.select_for_update().get(pk=plan_id)
        steps = list(plan.steps.select_for_update())
        step = next((s for s in steps if s.key == key and s.status == S.INTERRUPTED), None)
        if step is None or plan.status != Plan.Status.RUNNING:
            raise ServiceError(f"Step {key} is not interrupted.", status=409)
        audit.record(
            action="step.retry_requested" if retry else "step.skip_requested",
            actor=actor,
            plan_id=plan.pk,
            step_key=key,
            data={"risk": step.risk},
        )
        if retry:
            step_enqueue(step)
        else:
            step_finish(step, S.SKIPPED, note=f"Skipped by {actor.get_username()} after an interruption.")
            dispatch_locked(plan, steps)
    return step
