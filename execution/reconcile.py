"""The periodic reconciler: finds steps stuck past their deadline (a lost message, a dead worker)."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from execution.engine import queue_step
from execution.transitions import S, step_interrupt, step_transition
from planning.models import Plan, Step
from tools.registry import registry


def reconcile(now=None) -> dict:
    """Steps stuck in queued/running past their deadline: idempotent ones are queued again; others
    become interrupted for a person to retry or skip."""
    now = now or timezone.now()
    counts = {"requeued": 0, "interrupted": 0}
    stuck = Step.objects.filter(status__in=[S.QUEUED, S.RUNNING], deadline__lt=now, plan__status=Plan.Status.RUNNING).values_list(
        "pk", flat=True
    )
    for step_id in list(stuck):
        with transaction.atomic():
            step = Step.objects.select_for_update().filter(pk=step_id, status__in=[S.QUEUED, S.RUNNING], deadline__lt=now).first()
            if step is None:
                continue
            tool = registry.get(step.tool)
            if tool and tool.idempotent:
                step_transition(
                    step,
                    S.QUEUED,
                    fields={"deadline": now + timedelta(seconds=tool.timeout_s + settings.COUNTERSIGN_DEADLINE_GRACE_S)},
                    action="step.requeued",
                    data={"reason": "past its deadline"},
                    log=f"{step.key} was stuck past its deadline; queued again.",
                )
                queue_step(step)
                counts["requeued"] += 1
            else:
                step_interrupt(
                    step,
                    note="Interrupted: stuck past its deadline; it may or may not have run. Retry or skip it.",
                    reason="stuck past its deadline",
                    data={"reason": "past its deadline"},
                )
                counts["interrupted"] += 1
    return counts
