"""The engine: starts and cancels runs, and dispatches steps as their dependencies finish.

It runs exactly the approved revision of a plan. Dispatch holds the plan's row lock, so two workers never
dispatch the same step; each step's moves go through execution.transitions (checked, audited, announced
after commit). Executing one step is the worker's job (execution/worker.py).
"""

import json
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, Q
from django.db.models.expressions import RawSQL
from django.utils import timezone
from pydantic import ValidationError

from approvals import audit
from core import jobs
from core.canonical import sha256_of
from core.errors import ServiceError
from execution import code_apply
from execution.failpoints import failpoint
from execution.outcome import outcome_of
from execution.policy_gates import gate_decided_by_grant, gate_required
from execution.transitions import ALLOWED, DONE, OPEN, S, check_transition, step_finish, step_transition
from planning import broadcast, dry_runs
from planning.expressions import ExpressionError, evaluate_condition, resolve_templates
from planning.models import Plan, Step, content_hash_of
from planning.provenance import direct_sources, step_provenance
from planning.review import valid_plan_approval
from tools.registry import readable_validation_errors, registry
from tools.selectors import definition_change

RUN_RESET_FIELDS = [
    "status",
    "output",
    "error",
    "note",
    "resolved_args",
    "provenance",
    "gate_hash",
    "queued_at",
    "started_at",
    "finished_at",
    "deadline",
]


def tool_timeout(step: Step) -> float:
    tool = registry.get(step.tool)
    return tool.timeout_s if tool else 30


def queue_token(step: Step) -> int | None:
    """Names the queueing a message was sent for (its queued_at, in microseconds): a message from an
    earlier queueing of the step (one the reconciler gave up on and sent again) is recognised as stale."""
    return round(step.queued_at.timestamp() * 1_000_000) if step.queued_at else None


def queue_step(step: Step, countdown: float = 0) -> None:
    """Send the step to a worker after commit, with time limits from its tool."""
    timeout = tool_timeout(step)
    jobs.enqueue(
        "planning.tasks.execute_step_task",
        step.pk,
        queue_token(step),
        countdown=countdown,
        soft_time_limit=timeout,
        time_limit=timeout + 10,
        queue=settings.COUNTERSIGN_QUEUE_STEPS,
    )


def step_intact(step: Step) -> bool:
    """The step's row still holds what was approved (checked per step, so the cost does not grow with
    the plan: the whole plan's hash is checked once, when the run starts), and its tool's definition is
    still the one pinned in that content."""
    return step_refusal(step) is None


def step_refusal(step: Step) -> str | None:
    """Why the step may not run now, or None."""
    if not (step.approved_hash and sha256_of(step.content()) == step.approved_hash):
        return "it no longer matches the approved content"
    return definition_change(step.tool, step.tool_hash)


# ---- starting, cancelling ---------------------------------------------------------------------------


def plan_run(*, plan_id: int, actor) -> Plan:
    with transaction.atomic():
        plan = Plan.objects.select_for_update().select_related("goal").get(pk=plan_id)
        if plan.status != Plan.Status.APPROVED:
            raise ServiceError(f"Only an approved plan can run; this one is {plan.get_status_display().lower()}.", status=409)
        steps = list(plan.steps.select_for_update())
        if valid_plan_approval(plan) is None or content_hash_of(steps) != plan.content_hash:
            raise ServiceError("The plan's content is not the approved content; it needs a fresh approval.", status=409)
        if dry_runs.is_code_plan(plan):
            audit.record(
                action="plan.run_started", actor=actor, plan_id=plan.pk, data={"revision": plan.revision, "content_hash": plan.content_hash}
            )
            return code_apply.code_plan_apply(plan, actor)
        for step in steps:
            if step.status != S.SUCCEEDED:  # after a replan, completed steps and their outputs are kept
                check_transition(step, S.PENDING)
                step.status, step.output, step.error, step.note = S.PENDING, None, "", ""
                step.resolved_args, step.provenance, step.gate_hash = None, None, ""
                step.queued_at = step.started_at = step.finished_at = step.deadline = None
            if step.status != S.SUCCEEDED and (changed := definition_change(step.tool, step.tool_hash)) is not None:
                raise ServiceError(f"Step {step.key}: {changed}. Save the step again to pin the new definition, then approve.", status=409)
            step.approved_hash = sha256_of(step.content())
        Step.objects.bulk_update(steps, [*RUN_RESET_FIELDS, "approved_hash"])
        plan.status, plan.executing_hash, plan.started_at, plan.finished_at = Plan.Status.RUNNING, plan.content_hash, timezone.now(), None
        plan.answer_text = ""
        plan.save(update_fields=["status", "executing_hash", "started_at", "finished_at", "answer_text", "updated_at"])
        audit.record(
            action="plan.run_started", actor=actor, plan_id=plan.pk, data={"revision": plan.revision, "content_hash": plan.content_hash}
        )
        broadcast.announce(plan.pk, log=f"Run started by {actor.get_username()} (revision {plan.revision}).")
        dispatch_locked(plan, steps)
    return plan


def plan_cancel(*, plan_id: int, actor) -> Plan:
    with transaction.atomic():
        plan = Plan.objects.select_for_update().get(pk=plan_id)
        if plan.status not in {Plan.Status.RUNNING, Plan.Status.APPROVED}:
            raise ServiceError(
                f"Only an approved or running plan can be cancelled; this one is {plan.get_status_display().lower()}.", status=409
            )
        # One audit event for the whole cancel (not one per step), over the statuses the table lets cancel.
        cancellable = [status for status, targets in ALLOWED.items() if S.CANCELLED in targets]
        cancelled = plan.steps.filter(status__in=cancellable).update(
            status=S.CANCELLED, note=f"Cancelled by {actor.get_username()}", finished_at=timezone.now()
        )
        plan.status, plan.finished_at = Plan.Status.CANCELLED, timezone.now()
        plan.save(update_fields=["status", "finished_at", "updated_at"])
        audit.record(action="plan.cancelled", actor=actor, plan_id=plan.pk, data={"cancelled_steps": cancelled, "revision": plan.revision})
        broadcast.announce(
            plan.pk, all_steps=True, log=f"Cancelled by {actor.get_username()}; steps already running finish, nothing new starts."
        )
    return plan


# ---- dispatching ------------------------------------------------------------------------------------


def dispatch(plan_id: int) -> None:
    """Move every step whose dependencies are done: skip it, gate it, or queue it. Idempotent."""
    with transaction.atomic():
        # Only the plan's row is locked; its goal and requester come in the same query for the policy facts.
        plan = Plan.objects.select_for_update(of=("self",)).select_related("goal__requester").get(pk=plan_id)
        if plan.status != Plan.Status.RUNNING:
            return
        dispatch_locked(plan, list(plan.steps.select_for_update()))
        failpoint("during_dispatch")


def dispatch_after(plan_id: int, finished_key: str) -> None:
    """What the success of step `finished_key` makes ready, reading only its dependants and their
    dependencies (not the whole plan): each dependant whose dependencies all succeeded is prepared and
    queued or gated. Anything else (a blocked or skipped dependant whose skip must cascade, nothing left
    open so the plan ends, content that moved) is the whole-plan dispatch's, in the same transaction.

    The plan's lock is taken first, so of two steps that finish together the later one reads after the
    earlier one's commit, and a dependant of both is never missed (nor queued twice)."""
    with transaction.atomic():
        plan = Plan.objects.select_for_update(of=("self",)).select_related("goal__requester").get(pk=plan_id)
        if plan.status != Plan.Status.RUNNING:
            return
        by_key = {step.key: step for step in _neighbourhood(plan, finished_key)}
        if not _dispatch_dependants(plan, by_key, finished_key):
            dispatch_locked(plan, list(plan.steps.select_for_update()))
        failpoint("during_dispatch")


def _neighbourhood(plan: Plan, key: str):
    """The step `key`, the steps that depend on it and their dependencies; each says whether anything in
    the plan is still open. Read after the plan's lock is held; pending steps change only under it."""
    dependencies_of_dependants = RawSQL(  # noqa: S611 - our table, parameters bound
        f"SELECT jsonb_array_elements_text(depends_on) FROM {Step._meta.db_table} WHERE plan_id = %s AND depends_on @> %s::jsonb",  # noqa: S608
        (plan.pk, json.dumps([key])),
    )
    return (
        Step.objects.filter(plan_id=plan.pk)
        .filter(Q(key=key) | Q(depends_on__contains=[key]) | Q(key__in=dependencies_of_dependants))
        .annotate(plan_open=Exists(Step.objects.filter(plan_id=plan.pk, status__in=OPEN)))
    )


def _dispatch_dependants(plan: Plan, by_key: dict[str, Step], finished_key: str) -> bool:
    """Prepare the ready dependants of `finished_key`; False when the whole-plan dispatch must decide."""
    finished = by_key[finished_key]
    if plan.content_hash != plan.executing_hash or finished.status != S.SUCCEEDED or not finished.plan_open:
        return False
    dependants = [step for step in by_key.values() if step.status == S.PENDING and finished_key in step.depends_on]
    if any(by_key[key].status in {S.SKIPPED, S.FAILED, S.CANCELLED} for step in dependants for key in step.depends_on):
        return False
    ready = [step for step in dependants if all(by_key[key].status == S.SUCCEEDED for key in step.depends_on)]
    if any(step_refusal(step) is not None for step in ready):
        return False
    sources = by_key
    if any(direct_sources(step) for step in ready):
        # Templates and conditions may read any earlier step, and a provenance chain walks on through the
        # steps those read: they are done, so they are read without locks.
        sources = {step.key: step for step in plan.steps.all()} | by_key
    outputs = {step.key: step.output for step in sources.values() if step.status == S.SUCCEEDED}
    for step in ready:
        _prepare(plan, step, outputs, sources)
    # A dependant skipped or failed while being prepared may block further steps, or end the plan.
    return not any(step.status in DONE for step in ready)


def needs_dispatch(rows: list[tuple[str, str, list[str]]]) -> bool:
    """Whether a dispatch of a running plan would do anything, from its steps' (key, status, depends_on):
    a pending step whose dependencies are all done, or nothing left open (the plan must be finalised)."""
    status = {key: state for key, state, _ in rows}
    if not any(state in OPEN for state in status.values()):
        return True
    return any(state == S.PENDING and all(status.get(dep) in DONE for dep in deps) for _, state, deps in rows)


def dispatch_locked(plan: Plan, steps: list[Step]) -> None:
    by_key = {step.key: step for step in steps}
    if plan.content_hash != plan.executing_hash:
        fail_plan(plan, steps, "The plan's content no longer matches the approved hash; execution stopped.")
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
                step_finish(step, S.SKIPPED, note=f"Skipped: {blocked.key} {blocked.get_status_display().lower()}.")
                changed = True
            elif all(d.status == S.SUCCEEDED for d in deps):
                refusal = step_refusal(step)
                if refusal is not None:
                    fail_plan(plan, steps, f"Step {step.key} refused: {refusal}; execution stopped, the plan needs a fresh approval.")
                    return
                _prepare(plan, step, outputs, by_key)
                changed = changed or step.status in DONE
    if not any(step.status in OPEN for step in steps):
        _finalize(plan, steps)


def _prepare(plan: Plan, step: Step, outputs: dict, by_key: dict) -> None:
    """Resolve a ready step's arguments (recording where each value came from), then skip, fail, gate or
    queue it. A policy gates MEDIUM and HIGH steps that untrusted data reaches (defaults.cedar)."""
    try:
        if step.condition and not evaluate_condition(step.condition, outputs):
            step_finish(step, S.SKIPPED, note=f"Skipped: condition {step.condition} is false.")
            return
        resolved = resolve_templates(step.args, outputs)
    except ExpressionError as error:
        step_finish(step, S.FAILED, error=f"Could not prepare the step: {error}")
        return
    tool = registry.get(step.tool)
    if tool is None:
        step_finish(step, S.FAILED, error=f"Tool {step.tool!r} is not registered on this server.")
        return
    try:
        tool.validate_args(resolved)
    except ValidationError as error:
        step_finish(step, S.FAILED, error="Resolved arguments do not fit the tool: " + "; ".join(readable_validation_errors(error)))
        return
    step.resolved_args = resolved
    step.provenance = step_provenance(step, by_key)
    if gate_required(plan, step):
        gate_open(plan, step)
        if gate_decided_by_grant(plan, step):
            step_enqueue(step)
        return
    step_enqueue(step)


def gate_open(plan: Plan, step: Step, *, retry_requested_by=None) -> None:
    """Hold a HIGH step for a runtime approval of exactly this attempt: the hash covers the resolved
    arguments and the attempt number, so an approval of one attempt never lets another one run. A retry
    names who asked for it (they may not approve it)."""
    attempt = step.attempts.count() + 1
    gate_hash = sha256_of(
        {"plan_hash": plan.executing_hash, "step": step.key, "tool": step.tool, "args": step.resolved_args, "attempt": attempt}
    )
    data = {"tool": step.tool, "resolved_args": step.resolved_args, "gate_hash": gate_hash, "attempt": attempt}
    if retry_requested_by is not None:
        data["retry_requested_by"] = retry_requested_by.get_username()
    step_transition(
        step,
        S.WAITING_APPROVAL,
        fields={"resolved_args": step.resolved_args, "provenance": step.provenance, "gate_hash": gate_hash},
        data=data,
        actor=retry_requested_by,
        log=f"{step.key} waits for an approver: {step.tool} with its resolved arguments"
        + (f" (retry asked for by {retry_requested_by.get_username()})." if retry_requested_by else "."),
    )


def step_enqueue(step: Step, *, log: str | None = None, action: str | None = "", data: dict | None = None) -> None:
    """Queue a step for a worker. Its deadline here bounds only the wait for a claim (past it the step is
    simply queued again); the claim sets the deadline of the run itself."""
    now = timezone.now()
    deadline = now + timedelta(seconds=settings.COUNTERSIGN_QUEUED_DEADLINE_S)
    fields = {"resolved_args": step.resolved_args, "provenance": step.provenance, "queued_at": now, "deadline": deadline}
    step_transition(step, S.QUEUED, fields=fields, log=log, action=action, data=data)
    queue_step(step)


def run_deadline(step: Step):
    """When a claimed step counts as stuck: its tool's time limit plus the grace, from now."""
    return timezone.now() + timedelta(seconds=tool_timeout(step) + settings.COUNTERSIGN_DEADLINE_GRACE_S)


def fail_plan(plan: Plan, steps: list[Step], reason: str) -> None:
    for step in steps:
        if step.status in {S.PENDING, S.WAITING_APPROVAL, S.QUEUED}:
            step_finish(step, S.CANCELLED, note=reason)
    plan.status, plan.finished_at = Plan.Status.FAILED, timezone.now()
    plan.save(update_fields=["status", "finished_at", "updated_at"])
    audit.record(action="plan.failed", plan_id=plan.pk, data={"reason": reason})
    broadcast.announce(plan.pk, log=reason)


def _finalize(plan: Plan, steps: list[Step]) -> None:
    failed = [step for step in steps if step.status == S.FAILED]
    plan.status, plan.failure_reason = outcome_of(steps)
    plan.finished_at = timezone.now()
    plan.save(update_fields=["status", "failure_reason", "finished_at", "updated_at"])
    data = {"failed_steps": [s.key for s in failed], "revision": plan.revision, "reason": plan.failure_reason}
    audit.record(action=f"plan.{plan.status}", plan_id=plan.pk, data=data)
    broadcast.announce(
        plan.pk, log=f"Plan {plan.get_status_display().lower()}." + (f" {plan.failure_reason}" if plan.failure_reason else "")
    )
    aftermath_enqueue(plan, failed=bool(failed))


def aftermath_enqueue(plan: Plan, *, failed: bool) -> str:
    """Queue what follows a finished run: a replan when a step failed for good (while replans are left),
    otherwise the answer. Both tasks are idempotent, so the reconciler may queue them again."""
    if failed and plan.replan_count < settings.COUNTERSIGN_MAX_REPLANS:
        jobs.enqueue("planning.tasks.replan_task", plan.pk)
        return "replan"
    jobs.enqueue("planning.tasks.compose_answer_task", plan.pk)
    return "answer"
