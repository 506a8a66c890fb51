"""The worker's side of a step: claim it, call its tool, record the outcome, dispatch what it unblocked.

A step of a non-idempotent tool runs at most once per attempt key: the attempt row is committed before
the tool is called, so a redelivered task finds it and stops instead of acting twice.
"""

import logging
import os
import socket
from datetime import timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone
from pydantic import ValidationError

from core import statements
from execution.engine import dispatch, dispatch_after, needs_dispatch, queue_step, queue_token, run_deadline, step_intact
from execution.failpoints import failpoint
from execution.transitions import S, WriteRefused, step_finish, step_interrupt, step_transition
from planning import usage
from planning.models import Plan, Step, StepAttempt
from planning.review import approval_still_binds, valid_plan_approval
from tools.registry import ToolError, registry

log = logging.getLogger(__name__)


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _claim(step_id: int, token: int | None) -> tuple[Step, StepAttempt] | str:
    """Mark the step running and commit an attempt row before the tool runs. Otherwise say why not:
    "refused" (not runnable now: done, cancelled, or a non-idempotent attempt already began), "stale"
    (the step was queued again since this message was sent) or "failed" (the plan no longer matches its
    approval)."""
    with transaction.atomic():
        step = _locked_for_claim(step_id)
        plan = step.plan
        tool = registry.get(step.tool)
        if plan.status != Plan.Status.RUNNING or step.status not in {S.QUEUED, S.RUNNING}:
            return "refused"
        if token is not None and token != queue_token(step):
            # The reconciler sent the step again after this message had waited too long; the newer
            # message runs it, so this one must not (nor interrupt a run the newer one started).
            return "stale"
        approved = step.approval_binds or valid_plan_approval(plan) is not None
        if plan.content_hash != plan.executing_hash or not approved or not step_intact(step):
            step_finish(step, S.FAILED, error="Refused: the plan no longer matches the approved content.")
            return "failed"
        previous = step.previous_attempts
        if step.status == S.RUNNING and not (tool and tool.idempotent):
            # The task came back while its attempt was under way (the worker died): running it again could
            # repeat a side effect, so a person decides.
            step_interrupt(
                step,
                note="Interrupted: a previous attempt may have run. Retry or skip it.",
                reason="a previous attempt may have run",
                data={"attempts": previous},
            )
            return "refused"
        number = previous + 1
        key = f"{plan.executing_hash[:16]}:{step.key}:{plan.replan_count}:{step.queued_at.timestamp() if step.queued_at else 0}"
        if tool and tool.idempotent:
            key += f":{number}"
        attempt = StepAttempt(idempotency_key=key, step=step, number=number, worker=_worker_name())
        status = step.status
        try:
            step_transition(
                step,
                S.RUNNING,
                # The run's own deadline starts now: time spent waiting in the queue is not time running.
                fields={"started_at": step.started_at or timezone.now(), "deadline": run_deadline(step)},
                data={"attempt": number, "attempt_key": key, "args": step.resolved_args},
                log=f"{step.key} running ({step.tool}, attempt {number}).",
                # The attempt row and the move to running are one statement, and the move happens only if
                # the row was inserted: its unique key refuses a second start of the same attempt.
                write=lambda step, values: statements.insert_then_update(attempt, Step.objects.filter(pk=step.pk), values),
            )
        except WriteRefused:
            step.status = status
            step_interrupt(
                step,
                note="Interrupted: this attempt already started once. Retry or skip it.",
                reason="its attempt had already started",
                data={"attempt_key": key},
            )
            return "refused"
        failpoint("after_attempt_row")
    return step, attempt


def _locked_for_claim(step_id: int) -> Step:
    """One statement reads what a claim decides on: the step's row, locked (only it: parallel steps of
    one plan start without queueing on the plan's lock; a cancel takes the plan's lock and then the
    steps', so it waits for this claim or sees it), its plan and goal, whether the plan's approval still
    binds, and how many attempts the step had."""
    attempts = StepAttempt.objects.filter(step=OuterRef("pk")).order_by().values("step").annotate(n=Count("pk")).values("n")
    return (
        Step.objects.select_for_update(of=("self",))
        .select_related("plan__goal")
        .annotate(approval_binds=approval_still_binds("plan"), previous_attempts=Coalesce(Subquery(attempts), 0))
        .get(pk=step_id)
    )


def execute_step(step_id: int, token: int | None = None) -> str:
    claimed = _claim(step_id, token)
    if isinstance(claimed, str):
        # A refusal may be the redelivery of a step that finished just before its worker died, with the
        # dispatch after it lost: whatever that dispatch would have done is done now.
        plan_id = Step.objects.values_list("plan_id", flat=True).get(pk=step_id)
        if _has_work(plan_id):
            dispatch(plan_id)
        return claimed
    failpoint("after_claim")
    step, attempt = claimed
    tool = registry.get(step.tool)
    try:
        # LLM calls the tool makes (llm_generate) count against the plan and stop at its budget.
        with usage.metered(step.plan_id, step_key=step.key):
            output = tool.call(step.resolved_args or {})
    except Exception as error:  # noqa: BLE001 (any tool failure is recorded on the step, never lost)
        return _attempt_failed(step, attempt, tool, error)
    failpoint("after_tool_returns")
    with transaction.atomic():
        step = _finish(step, attempt, output)
    failpoint("after_finish")
    dispatch_after(step.plan_id, step.key)
    return "succeeded"


def _finish(step: Step, attempt: StepAttempt, output) -> Step:
    """Record the success: the attempt and the step in one statement, written only while the step is
    still running (the row lock is taken by that write), then its audit event. A step that moved since
    the claim (the reconciler interrupted or requeued it) is decided again under its lock, as before."""
    attempt_done = {"status": "succeeded", "finished_at": timezone.now()}

    def write(step: Step, values: dict) -> bool:
        still_running = Step.objects.filter(pk=step.pk, status=S.RUNNING)
        return statements.update_both(StepAttempt.objects.filter(pk=attempt.pk), attempt_done, still_running, values) == 1

    try:
        return step_finish(step, S.SUCCEEDED, output=output, write=write)
    except WriteRefused:  # the step moved since the claim; nothing was written to it
        step = Step.objects.select_for_update().get(pk=step.pk)
        return step_finish(step, S.SUCCEEDED, output=output)


def _has_work(plan_id: int) -> bool:
    """Read without locks after our own commit: of two steps that finish together, the one that looks
    last sees the other's commit, so a ready step is never missed."""
    return needs_dispatch(list(Step.objects.filter(plan_id=plan_id).values_list("key", "status", "depends_on")))


def _failure_message(step: Step, tool, error: Exception) -> str:
    if isinstance(error, SoftTimeLimitExceeded):
        return f"Timed out after {tool.timeout_s:g} s."
    if isinstance(error, (ToolError, ValidationError)):
        return str(error)
    log.exception("Tool %s failed on step %s", step.tool, step.pk)
    return f"{type(error).__name__}: {error}"


def _attempt_failed(step: Step, attempt: StepAttempt, tool, error: Exception) -> str:
    message = _failure_message(step, tool, error)
    retry = tool.idempotent and attempt.number < settings.COUNTERSIGN_MAX_ATTEMPTS
    with transaction.atomic():
        StepAttempt.objects.filter(pk=attempt.pk).update(status="failed", error=message[:2000], finished_at=timezone.now())
        step = Step.objects.select_for_update().get(pk=step.pk)
        if retry:
            delay = settings.COUNTERSIGN_RETRY_BACKOFF_S * 2 ** (attempt.number - 1)
            deadline = timezone.now() + timedelta(seconds=delay + settings.COUNTERSIGN_QUEUED_DEADLINE_S)
            step_transition(
                step,
                S.QUEUED,
                fields={"error": message, "deadline": deadline},
                action="step.retrying",
                data={"attempt": attempt.number, "error": message[:2000], "delay_s": delay},
                log=f"{step.key} attempt {attempt.number} failed ({message}); retrying in {delay:g} s.",
            )
            queue_step(step, countdown=delay)
        else:
            step_finish(step, S.FAILED, error=message)
    if not retry:
        dispatch(step.plan_id)
    return "retrying" if retry else "failed"
