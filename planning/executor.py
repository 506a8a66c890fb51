"""The executor: runs exactly the approved revision of a plan, step by step, as fast as dependencies allow.

Every state transition happens in a transaction that locks the plan row (so two workers never dispatch the
same step), is audited, and is broadcast to the plan's live page after commit. A step of a non-idempotent
tool runs at most once per attempt key: the attempt row is committed before the tool is called, so a
redelivered task finds it and stops instead of acting twice.
"""

import logging
import os
import socket
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError

from approvals import audit
from approvals.models import Approval
from approvals.policy import needs_runtime_gate
from planning import progress
from planning.expressions import ExpressionError, evaluate_condition, resolve_templates
from planning.models import Plan, Step, StepAttempt, content_hash_of
from planning.services import ServiceError
from planning.tools.registry import ToolError, readable_validation_errors, registry
from core.canonical import sha256_of

log = logging.getLogger(__name__)

S = Step.Status
OPEN = {S.PENDING, S.WAITING_APPROVAL, S.QUEUED, S.RUNNING, S.INTERRUPTED}
DONE = {S.SUCCEEDED, S.FAILED, S.SKIPPED, S.CANCELLED}


def _queue(step: Step, countdown: float = 0) -> None:
    from planning.tasks import execute_step_task

    tool = registry.get(step.tool)
    timeout = tool.timeout_s if tool else 30
    step_id = step.pk
    queue = settings.COUNTERSIGN_QUEUE_STEPS
    transaction.on_commit(
        lambda: execute_step_task.apply_async(
            (step_id,), countdown=countdown, soft_time_limit=timeout, time_limit=timeout + 10, queue=queue
        )
    )


def valid_plan_approval(plan: Plan) -> Approval | None:
    """The approval that covers the plan's current content, if any (not voided, same hash and revision;
    for code plans the hash also covers the dry run's diff)."""
    from planning import codeplans

    expected = codeplans.approval_hash(plan, codeplans.current_dry_run(plan))
    return (
        Approval.objects.filter(
            plan=plan,
            kind=Approval.Kind.PLAN,
            decision=Approval.Decision.APPROVED,
            voided_at__isnull=True,
            content_hash=expected,
            revision=plan.revision,
        )
        .order_by("-created_at")
        .first()
    )


def _step_intact(step: Step) -> bool:
    """The step's row still holds what was approved (checked per step, so the cost does not grow with
    the plan: the whole plan's hash is checked once, when the run starts)."""
    return bool(step.approved_hash) and sha256_of(step.content()) == step.approved_hash


# ---- starting, cancelling ---------------------------------------------------------------------------


def plan_run(*, plan_id: int, actor) -> Plan:
    from planning import codeplans

    with transaction.atomic():
        plan = Plan.objects.select_for_update().select_related("goal").get(pk=plan_id)
        if plan.status != Plan.Status.APPROVED:
            raise ServiceError(f"Only an approved plan can run; this one is {plan.get_status_display().lower()}.", status=409)
        steps = list(plan.steps.select_for_update())
        if valid_plan_approval(plan) is None or content_hash_of(steps) != plan.content_hash:
            raise ServiceError("The plan's content is not the approved content; it needs a fresh approval.", status=409)
        if codeplans.is_code_plan(plan):
            audit.record(
                action="plan.run_started", actor=actor, plan_id=plan.pk, data={"revision": plan.revision, "content_hash": plan.content_hash}
            )
            return codeplans.apply(plan, actor)
        for step in steps:
            if step.status != S.SUCCEEDED:  # after a replan, completed steps and their outputs are kept
                step.status, step.output, step.error, step.note = S.PENDING, None, "", ""
                step.resolved_args, step.gate_hash = None, ""
                step.queued_at = step.started_at = step.finished_at = step.deadline = None
            step.approved_hash = sha256_of(step.content())
        Step.objects.bulk_update(
            steps,
            [
                "status",
                "output",
                "error",
                "note",
                "resolved_args",
                "gate_hash",
                "queued_at",
                "started_at",
                "finished_at",
                "deadline",
                "approved_hash",
            ],
        )
        plan.status, plan.executing_hash, plan.started_at, plan.finished_at = Plan.Status.RUNNING, plan.content_hash, timezone.now(), None
        plan.answer_text = ""
        plan.save(update_fields=["status", "executing_hash", "started_at", "finished_at", "answer_text", "updated_at"])
        audit.record(
            action="plan.run_started", actor=actor, plan_id=plan.pk, data={"revision": plan.revision, "content_hash": plan.content_hash}
        )
        progress.announce(plan.pk, log=f"Run started by {actor.get_username()} (revision {plan.revision}).")
        _dispatch_locked(plan, steps)
    return plan


def plan_cancel(*, plan_id: int, actor) -> Plan:
    with transaction.atomic():
        plan = Plan.objects.select_for_update().get(pk=plan_id)
        if plan.status not in {Plan.Status.RUNNING, Plan.Status.APPROVED}:
            raise ServiceError(
                f"Only an approved or running plan can be cancelled; this one is {plan.get_status_display().lower()}.", status=409
            )
        cancelled = plan.steps.filter(status__in=[S.PENDING, S.WAITING_APPROVAL, S.QUEUED, S.INTERRUPTED]).update(
            status=S.CANCELLED, note=f"Cancelled by {actor.get_username()}", finished_at=timezone.now()
        )
        plan.status, plan.finished_at = Plan.Status.CANCELLED, timezone.now()
        plan.save(update_fields=["status", "finished_at", "updated_at"])
        audit.record(action="plan.cancelled", actor=actor, plan_id=plan.pk, data={"cancelled_steps": cancelled, "revision": plan.revision})
        progress.announce(
            plan.pk, all_steps=True, log=f"Cancelled by {actor.get_username()}; steps already running finish, nothing new starts."
        )
    return plan


# ---- dispatching ------------------------------------------------------------------------------------


def dispatch(plan_id: int) -> None:
    """Move every step whose dependencies are done: skip it, gate it, or queue it. Idempotent."""
    with transaction.atomic():
        plan = Plan.objects.select_for_update().get(pk=plan_id)
        if plan.status != Plan.Status.RUNNING:
            return
        _dispatch_locked(plan, list(plan.steps.select_for_update()))


def _dispatch_locked(plan: Plan, steps: list[Step]) -> None:
    by_key = {step.key: step for step in steps}
    if plan.content_hash != plan.executing_hash:
        _fail_plan(plan, steps, "The plan's content no longer matches the approved hash; execution stopped.")
        return
    outputs = {step.key: step.output for step in steps if step.status == S.SUCCEEDED}
    changed = True
    while changed:  # a skip can unblock (and skip) further dependents in the same pass
        changed = False
        for step in steps:
            if step.status != S.PENDING:
                continue
            deps = [by_key[key] for key in step.depends_on]
            blocked = next((d for d in deps if d.status in {S.SKIPPED, S.FAILED, S.CANCELLED}), None)
            if blocked is not None:
                _finish(step, S.SKIPPED, note=f"Skipped: {blocked.key} {blocked.get_status_display().lower()}.")
                changed = True
            elif all(d.status == S.SUCCEEDED for d in deps):
                if not _step_intact(step):
                    _fail_plan(plan, steps, f"Step {step.key} no longer matches the approved content; execution stopped.")
                    return
                _start(plan, step, outputs)
                changed = changed or step.status in DONE
    if not any(step.status in OPEN for step in steps):
        _finalize(plan, steps)


def _start(plan: Plan, step: Step, outputs: dict) -> None:
    try:
        if step.condition and not evaluate_condition(step.condition, outputs):
            _finish(step, S.SKIPPED, note=f"Skipped: condition {step.condition} is false.")
            return
        resolved = resolve_templates(step.args, outputs)
    except ExpressionError as error:
        _finish(step, S.FAILED, error=f"Could not prepare the step: {error}")
        return
    tool = registry.get(step.tool)
    if tool is None:
        _finish(step, S.FAILED, error=f"Tool {step.tool!r} is not registered on this server.")
        return
    try:
        tool.validate_args(resolved)
    except ValidationError as error:
        _finish(step, S.FAILED, error="Resolved arguments do not fit the tool: " + "; ".join(readable_validation_errors(error)))
        return
    step.resolved_args = resolved
    if needs_runtime_gate(registry.risk_of(step.tool)):
        step.status = S.WAITING_APPROVAL
        step.gate_hash = sha256_of({"plan_hash": plan.executing_hash, "step": step.key, "tool": step.tool, "args": resolved})
        step.save(update_fields=["status", "resolved_args", "gate_hash"])
        audit.record(
            action="gate.opened",
            plan_id=plan.pk,
            step_key=step.key,
            data={"risk": step.risk, "tool": step.tool, "resolved_args": resolved, "gate_hash": step.gate_hash},
        )
        progress.announce(plan.pk, steps=[step.key], log=f"{step.key} waits for an approver: {step.tool} with its resolved arguments.")
        return
    _enqueue(plan, step, tool.timeout_s)


def _enqueue(plan: Plan, step: Step, timeout_s: float) -> None:
    now = timezone.now()
    step.status, step.queued_at = S.QUEUED, now
    step.deadline = now + timedelta(seconds=timeout_s + settings.COUNTERSIGN_DEADLINE_GRACE_S)
    step.save(update_fields=["status", "resolved_args", "queued_at", "deadline"])
    progress.announce(plan.pk, steps=[step.key])
    _queue(step)


def _finish(step: Step, status: str, *, note: str = "", error: str = "", output=None) -> None:
    step.status, step.note, step.error, step.finished_at = status, note[:300], error, timezone.now()
    if output is not None:
        step.output = output
    step.save(update_fields=["status", "note", "error", "finished_at", "output"])
    action = {S.SKIPPED: "step.skipped", S.FAILED: "step.failed", S.SUCCEEDED: "step.succeeded", S.CANCELLED: "step.cancelled"}.get(
        status, f"step.{status}"
    )
    audit.record(
        action=action, plan_id=step.plan_id, step_key=step.key, data={"risk": step.risk, "note": note[:300], "error": error[:2000]}
    )
    progress.announce(
        step.plan_id,
        steps=[step.key],
        log=f"{step.key} {step.get_status_display().lower()}" + (f": {note or error}" if note or error else "."),
    )


def _fail_plan(plan: Plan, steps: list[Step], reason: str) -> None:
    for step in steps:
        if step.status in {S.PENDING, S.WAITING_APPROVAL, S.QUEUED}:
            _finish(step, S.CANCELLED, note=reason)
    plan.status, plan.finished_at = Plan.Status.FAILED, timezone.now()
    plan.save(update_fields=["status", "finished_at", "updated_at"])
    audit.record(action="plan.failed", plan_id=plan.pk, data={"reason": reason})
    progress.announce(plan.pk, log=reason)


def _finalize(plan: Plan, steps: list[Step]) -> None:
    failed = [step for step in steps if step.status == S.FAILED]
    plan.status = Plan.Status.FAILED if failed else Plan.Status.SUCCEEDED
    plan.finished_at = timezone.now()
    plan.save(update_fields=["status", "finished_at", "updated_at"])
    audit.record(action=f"plan.{plan.status}", plan_id=plan.pk, data={"failed_steps": [s.key for s in failed], "revision": plan.revision})
    progress.announce(plan.pk, log=f"Plan {plan.get_status_display().lower()}.")
    from planning.tasks import compose_answer_task, replan_task

    if failed and plan.replan_count < settings.COUNTERSIGN_MAX_REPLANS:
        transaction.on_commit(lambda: replan_task.delay(plan.pk))
    else:
        transaction.on_commit(lambda: compose_answer_task.delay(plan.pk))


# ---- executing one step -----------------------------------------------------------------------------


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _claim(step_id: int) -> tuple[Step, StepAttempt] | str:
    """Mark the step running and commit an attempt row before the tool runs. Otherwise say why not:
    "refused" (not runnable now: done, cancelled, or a non-idempotent attempt already began) or
    "failed" (the plan no longer matches its approval)."""
    with transaction.atomic():
        # Only the step's row is locked: parallel steps of one plan start without queueing on the plan's
        # lock. A cancel takes the plan's lock and then the steps', so it waits for this claim or sees it.
        step = Step.objects.select_for_update().get(pk=step_id)
        plan = Plan.objects.select_related("goal").get(pk=step.plan_id)
        tool = registry.get(step.tool)
        if plan.status != Plan.Status.RUNNING or step.status not in {S.QUEUED, S.RUNNING}:
            return "refused"
        if plan.content_hash != plan.executing_hash or valid_plan_approval(plan) is None or not _step_intact(step):
            _finish(step, S.FAILED, error="Refused: the plan no longer matches the approved content.")
            return "failed"
        previous = step.attempts.count()
        if step.status == S.RUNNING and not (tool and tool.idempotent):
            # The task came back while its attempt was under way (the worker died): running it again could
            # repeat a side effect, so a person decides.
            step.status, step.note = S.INTERRUPTED, "Interrupted: a previous attempt may have run. Retry or skip it."
            step.save(update_fields=["status", "note"])
            audit.record(action="step.interrupted", plan_id=plan.pk, step_key=step.key, data={"risk": step.risk, "attempts": previous})
            progress.announce(plan.pk, steps=[step.key], log=f"{step.key} interrupted: a previous attempt may have run.")
            return "refused"
        number = previous + 1
        key = f"{plan.executing_hash[:16]}:{step.key}:{plan.replan_count}:{step.queued_at.timestamp() if step.queued_at else 0}"
        if tool and tool.idempotent:
            key += f":{number}"
        attempt, created = StepAttempt.objects.get_or_create(
            idempotency_key=key, defaults={"step": step, "number": number, "worker": _worker_name()}
        )
        if not created:
            step.status, step.note = S.INTERRUPTED, "Interrupted: this attempt already started once. Retry or skip it."
            step.save(update_fields=["status", "note"])
            audit.record(action="step.interrupted", plan_id=plan.pk, step_key=step.key, data={"risk": step.risk, "attempt_key": key})
            progress.announce(plan.pk, steps=[step.key], log=f"{step.key} interrupted: its attempt had already started.")
            return "refused"
        step.status, step.started_at = S.RUNNING, step.started_at or timezone.now()
        step.save(update_fields=["status", "started_at"])
        audit.record(
            action="step.started",
            plan_id=plan.pk,
            step_key=step.key,
            data={"risk": step.risk, "attempt": number, "attempt_key": key, "args": step.resolved_args},
        )
        progress.announce(plan.pk, steps=[step.key], log=f"{step.key} running ({step.tool}, attempt {number}).")
    return step, attempt


def execute_step(step_id: int) -> str:
    claimed = _claim(step_id)
    if claimed == "failed":
        dispatch(Step.objects.values_list("plan_id", flat=True).get(pk=step_id))
    if isinstance(claimed, str):
        return claimed
    step, attempt = claimed
    tool = registry.get(step.tool)
    try:
        output = tool.call(step.resolved_args or {})
    except Exception as error:  # noqa: BLE001 (any tool failure is recorded on the step, never lost)
        return _attempt_failed(step, attempt, tool, error)
    with transaction.atomic():
        StepAttempt.objects.filter(pk=attempt.pk).update(status="succeeded", finished_at=timezone.now())
        step = Step.objects.select_for_update().get(pk=step.pk)
        _finish(step, S.SUCCEEDED, output=output)
    if _has_work(step.plan_id):
        dispatch(step.plan_id)
    return "succeeded"


def _has_work(plan_id: int) -> bool:
    """Whether a dispatch would do anything: a pending step whose dependencies are all done, or nothing
    left open (the plan must be finalised). Read without locks after our own commit: of two steps that
    finish together, the one that looks last sees the other's commit, so a ready step is never missed."""
    rows = list(Step.objects.filter(plan_id=plan_id).values_list("key", "status", "depends_on"))
    status = {key: state for key, state, _ in rows}
    if not any(state in OPEN for state in status.values()):
        return True
    return any(state == S.PENDING and all(status.get(dep) in DONE for dep in deps) for _, state, deps in rows)


def _attempt_failed(step: Step, attempt: StepAttempt, tool, error: Exception) -> str:
    from celery.exceptions import SoftTimeLimitExceeded

    if isinstance(error, SoftTimeLimitExceeded):
        message = f"Timed out after {tool.timeout_s:g} s."
    elif isinstance(error, (ToolError, ValidationError)):
        message = str(error)
    else:
        log.exception("Tool %s failed on step %s", step.tool, step.pk)
        message = f"{type(error).__name__}: {error}"
    retry = tool.idempotent and attempt.number < settings.COUNTERSIGN_MAX_ATTEMPTS
    with transaction.atomic():
        StepAttempt.objects.filter(pk=attempt.pk).update(status="failed", error=message[:2000], finished_at=timezone.now())
        step = Step.objects.select_for_update().get(pk=step.pk)
        if retry:
            delay = settings.COUNTERSIGN_RETRY_BACKOFF_S * 2 ** (attempt.number - 1)
            step.status, step.error = S.QUEUED, message
            step.deadline = timezone.now() + timedelta(seconds=delay + tool.timeout_s + settings.COUNTERSIGN_DEADLINE_GRACE_S)
            step.save(update_fields=["status", "error", "deadline"])
            audit.record(
                action="step.retrying",
                plan_id=step.plan_id,
                step_key=step.key,
                data={"risk": step.risk, "attempt": attempt.number, "error": message[:2000], "delay_s": delay},
            )
            progress.announce(
                step.plan_id, steps=[step.key], log=f"{step.key} attempt {attempt.number} failed ({message}); retrying in {delay:g} s."
            )
            _queue(step, countdown=delay)
        else:
            _finish(step, S.FAILED, error=message)
    if not retry:
        dispatch(step.plan_id)
    return "retrying" if retry else "failed"


# ---- people deciding at run time ---------------------------------------------------------------------


def gate_decide(*, plan_id: int, key: str, actor, approve: bool, comment: str = "", gate_hash: str | None = None) -> Step:
    from approvals.policy import four_eyes_violation
    from planning.permissions import user_can

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
            _enqueue(plan, step, registry.get(step.tool).timeout_s if registry.get(step.tool) else 30)
        else:
            _finish(step, S.SKIPPED, note=f"Denied by {actor.get_username()}" + (f": {comment}" if comment else "."))
            _dispatch_locked(plan, steps)
    return step


def interrupted_resolve(*, plan_id: int, key: str, actor, retry: bool) -> Step:
    """A person decides what happens to an interrupted step: run it again, or skip it."""
    from planning.permissions import user_can

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
            tool = registry.get(step.tool)
            _enqueue(plan, step, tool.timeout_s if tool else 30)
        else:
            _finish(step, S.SKIPPED, note=f"Skipped by {actor.get_username()} after an interruption.")
            _dispatch_locked(plan, steps)
    return step


# ---- the periodic reconciler --------------------------------------------------------------------------


def reconcile(now=None) -> dict:
    """Steps stuck in queued/running past their deadline (a lost message, a dead worker): idempotent ones
    are queued again; others become interrupted for a person to retry or skip."""
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
                step.status, step.deadline = S.QUEUED, now + timedelta(seconds=tool.timeout_s + settings.COUNTERSIGN_DEADLINE_GRACE_S)
                step.save(update_fields=["status", "deadline"])
                audit.record(
                    action="step.requeued", plan_id=step.plan_id, step_key=step.key, data={"risk": step.risk, "reason": "past its deadline"}
                )
                progress.announce(step.plan_id, steps=[step.key], log=f"{step.key} was stuck past its deadline; queued again.")
                _queue(step)
                counts["requeued"] += 1
            else:
                step.status, step.note = (
                    S.INTERRUPTED,
                    "Interrupted: stuck past its deadline; it may or may not have run. Retry or skip it.",
                )
                step.save(update_fields=["status", "note"])
                audit.record(
                    action="step.interrupted",
                    plan_id=step.plan_id,
                    step_key=step.key,
                    data={"risk": step.risk, "reason": "past its deadline"},
                )
                progress.announce(step.plan_id, steps=[step.key], log=f"{step.key} interrupted: stuck past its deadline.")
                counts["interrupted"] += 1
    return counts
