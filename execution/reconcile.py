"""The periodic reconciler: the one place that notices work nobody is doing any more (a lost message, a
dead worker, a dropped database connection between two transactions) and starts it again.

Each pass is idempotent and takes the same locks as the code it stands in for, so racing a live worker
does no harm. What it recovers, and the setting that bounds how long it waits first:
- a step queued but never claimed: queued again (COUNTERSIGN_QUEUED_DEADLINE_S);
- a step running past its tool's time limit (+ COUNTERSIGN_DEADLINE_GRACE_S): an idempotent one is
  queued again, any other is interrupted for a person, since it may or may not have run;
- a running plan with a step ready to go, or nothing left open: dispatched or finalised (every pass);
- a finished plan with neither its answer nor a replan: its aftermath queued again
  (COUNTERSIGN_AFTERMATH_DEADLINE_S);
- a plan still planning: planning fails with the reason, and it can be planned again
  (COUNTERSIGN_PLANNING_DEADLINE_S).
"""

from collections import defaultdict
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from approvals import audit, webhooks
from execution.deadlines import deadlines_enforce
from execution.engine import aftermath_enqueue, dispatch, needs_dispatch, queue_step, run_deadline, step_enqueue
from execution.transitions import S, step_interrupt, step_transition
from planning import broadcast
from planning.models import FINISHED_STATUSES, Plan, Step
from tools.registry import registry

BATCH = 200  # plans or steps per kind and pass; the rest wait for the next pass


def reconcile(now=None) -> dict:
    now = now or timezone.now()
    counts = {"requeued": 0, "interrupted": 0, "dispatched": 0, "aftermath": 0, "planning_failed": 0}
    for step_id in _past_deadline(now):
        outcome = _recover_step(step_id, now)
        if outcome:
            counts[outcome] += 1
    counts["dispatched"] = _dispatch_stranded_plans()
    counts["aftermath"] = _requeue_aftermath(now)
    counts["planning_failed"] = _fail_stuck_planning(now)
    counts.update(deadlines_enforce(now))
    counts["webhooks"] = webhooks.requeue_stranded(now)
    return counts


def _past_deadline(now) -> list[int]:
    stuck = Step.objects.filter(status__in=[S.QUEUED, S.RUNNING], deadline__lt=now, plan__status=Plan.Status.RUNNING)
    return list(stuck.values_list("pk", flat=True)[:BATCH])


def _recover_step(step_id: int, now) -> str | None:
    with transaction.atomic():
        step = Step.objects.select_for_update().filter(pk=step_id, status__in=[S.QUEUED, S.RUNNING], deadline__lt=now).first()
        if step is None:
            return None
        if step.status == S.QUEUED:
            # Never claimed, so it never ran: queueing it again is safe for any tool. The new queueing
            # makes the old message stale, so at most one of them claims the step.
            step_enqueue(
                step,
                action="step.requeued",
                data={"reason": "not claimed before its deadline"},
                log=f"{step.key} was not picked up; queued again.",
            )
            return "requeued"
        tool = registry.get(step.tool)
        if tool and tool.idempotent:
            step_transition(
                step,
                S.QUEUED,
                fields={"queued_at": now, "deadline": run_deadline(step)},
                action="step.requeued",
                data={"reason": "past its deadline"},
                log=f"{step.key} was stuck past its deadline; queued again.",
            )
            queue_step(step)
            return "requeued"
        step_interrupt(
            step,
            note="Interrupted: stuck past its deadline; it may or may not have run. Retry or skip it.",
            reason="stuck past its deadline",
            data={"reason": "past its deadline"},
        )
        return "interrupted"


def _dispatch_stranded_plans() -> int:
    """Running plans whose next move was lost (the finish committed, the dispatch after it did not)."""
    rows = defaultdict(list)
    for plan_id, key, status, depends_on in Step.objects.filter(plan__status=Plan.Status.RUNNING).values_list(
        "plan_id", "key", "status", "depends_on"
    ):
        rows[plan_id].append((key, status, depends_on))
    stranded = [plan_id for plan_id, steps in rows.items() if needs_dispatch(steps)][:BATCH]
    for plan_id in stranded:
        dispatch(plan_id)
    return len(stranded)


def _requeue_aftermath(now) -> int:
    """Finished plans whose answer or replan never came (its task was lost, or its worker died)."""
    cutoff = now - timedelta(seconds=settings.COUNTERSIGN_AFTERMATH_DEADLINE_S)
    waiting = Plan.objects.filter(status__in=FINISHED_STATUSES, answer_text="", updated_at__lt=cutoff)
    requeued = 0
    for plan_id in list(waiting.values_list("pk", flat=True)[:BATCH]):
        with transaction.atomic():
            plan = Plan.objects.select_for_update().filter(pk=plan_id, answer_text="", updated_at__lt=cutoff).first()
            if plan is None or plan.status not in FINISHED_STATUSES:
                continue
            failed = plan.steps.filter(status=S.FAILED).exists()
            # Saving restarts the wait, so a task still on its way is not queued twice per deadline.
            plan.save(update_fields=["updated_at"])
            task = aftermath_enqueue(plan, failed=failed)
            audit.record(action="plan.aftermath_requeued", plan_id=plan.pk, data={"task": task})
            requeued += 1
    return requeued


def _fail_stuck_planning(now) -> int:
    cutoff = now - timedelta(seconds=settings.COUNTERSIGN_PLANNING_DEADLINE_S)
    failed = 0
    for plan_id in list(Plan.objects.filter(status=Plan.Status.PLANNING, updated_at__lt=cutoff).values_list("pk", flat=True)[:BATCH]):
        with transaction.atomic():
            plan = Plan.objects.select_for_update().filter(pk=plan_id, status=Plan.Status.PLANNING, updated_at__lt=cutoff).first()
            if plan is None:
                continue
            reason = (
                f"Planning did not finish within {settings.COUNTERSIGN_PLANNING_DEADLINE_S:g} s "
                "(the planner's worker may have stopped); plan again."
            )
            plan.status, plan.failure_reason = Plan.Status.PLANNING_FAILED, reason
            plan.save(update_fields=["status", "failure_reason", "updated_at"])
            audit.record(action="plan.planning_failed", plan_id=plan.pk, data={"reason": reason})
            broadcast.announce(plan.pk, log=reason)
            failed += 1
    return failed
