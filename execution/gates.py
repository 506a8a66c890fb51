"""People deciding at run time: answering a runtime gate, and resolving an interrupted step."""

from django.conf import settings
from django.db import transaction
from pydantic import ValidationError

from approvals import audit
from approvals.models import Approval, AuditEvent
from approvals.policy import four_eyes_violation, needs_runtime_gate
from core.canonical import sha256_of
from core.errors import ServiceError
from core.roles import user_can
from core.text import json_control_character_problems, refuse_control_characters
from execution.engine import dispatch_locked, gate_open, step_enqueue
from execution.failpoints import failpoint
from execution.policy_gates import gate_refusal
from execution.transitions import S, step_finish
from planning.approval_rules import plan_verdicts_for_call
from planning.models import Plan, Step
from tools.registry import readable_validation_errors, registry


def gate_answer(
    *, plan_id: int, key: str, actor, approve: bool, comment: str = "", gate_hash: str | None = None, args: dict | None = None
) -> Step:
    """Approve or deny a step waiting at its runtime gate, bound to the gate hash the approver saw. With
    `args`, the approver edits the call's arguments and approves the edited call in one decision: the
    arguments are validated against the tool, checked by the policies again, and get a new gate hash;
    the decision records both the original and the edited arguments."""
    if not user_can(actor, "approve"):
        raise ServiceError("Only approvers can decide gates.", status=403)
    refuse_control_characters(comment, field="comment")
    if args is not None and not approve:
        raise ServiceError("Edited arguments come with an approval; to refuse the call, deny it.", status=422)
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
        authors = plan.author_ids()
        blocked = four_eyes_violation(approver=actor, author_ids=authors, requester_id=plan.goal.requester_id)
        if not blocked and settings.COUNTERSIGN_FOUR_EYES and actor.pk == _retry_requester_id(step):
            blocked = "Four-eyes rule: you asked for this retry, so someone else must approve it."
        original = None
        if not blocked and args is not None:
            original = _edit_gate_args(plan, step, args, actor)
        blocked = blocked or (gate_refusal(plan, step, actor) if approve else None)
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
            data={
                "risk": step.risk,
                "gate_hash": step.gate_hash,
                "resolved_args": step.resolved_args,
                "comment": comment[:5000],
                **({"edited": True, "original_args": original["args"], "original_gate_hash": original["gate_hash"]} if original else {}),
            },
        )
        if approve:
            step_enqueue(step)
        else:
            step_finish(step, S.SKIPPED, note=f"Denied by {actor.get_username()}" + (f": {comment}" if comment else "."))
            dispatch_locked(plan, steps)
        failpoint("during_gate_decision")
    return step


def _edit_gate_args(plan: Plan, step: Step, args: dict, actor) -> dict | None:
    """Put the approver's edited arguments on the waiting step (same tool, validated) under a new gate
    hash; return the original arguments and hash, or None when nothing changed. The caller holds the
    step's lock and rolls all of this back if the decision is then refused."""
    if not isinstance(args, dict):
        raise ServiceError("Edited arguments must be a JSON object.", status=422)
    problems = [f"{path or 'arguments'} {problem}" for path, problem in json_control_character_problems(args)]
    if problems:
        raise ServiceError("; ".join(problems), status=422)
    tool = registry.get(step.tool)
    if tool is None:
        raise ServiceError(f"Tool {step.tool!r} is not registered on this server.", status=409)
    try:
        edited = tool.validate_args(args)
    except ValidationError as error:
        raise ServiceError(
            "The edited arguments do not fit the tool: " + "; ".join(readable_validation_errors(error)), status=422
        ) from error
    if edited == step.resolved_args:
        return None
    original = {"args": step.resolved_args, "gate_hash": step.gate_hash}
    step.resolved_args = edited
    verdict = plan_verdicts_for_call(plan, step, user=actor)
    if verdict.denials:
        denial = verdict.denials[0]
        raise ServiceError(f"Policy {denial.policy} forbids the edited call: {denial.reason}", status=403)
    more = [r for r in verdict.requirements if r.count > 1]
    if more:
        raise ServiceError(
            f"The edited call needs {more[0].count} approvers (policy {more[0].policy}); deny it and edit the plan instead.", status=403
        )
    step.gate_hash = sha256_of({"gate_hash": original["gate_hash"], "edited_args": edited, "edited_by": actor.pk})
    step.save(update_fields=["resolved_args", "gate_hash"])
    return original


def _retry_requester_id(step: Step) -> int | None:
    """Who asked for the retry this gate holds, if it holds one: the actor of the gate.opened event that
    carries this gate's hash (the audit trail is the record; a first gate is opened by the system)."""
    opened = (
        AuditEvent.objects.filter(plan_id=step.plan_id, step_key=step.key, action="gate.opened", data__gate_hash=step.gate_hash)
        .order_by("-seq")
        .values_list("actor_id", flat=True)
        .first()
    )
    return opened


def interrupted_step_resolve(*, plan_id: int, key: str, actor, retry: bool) -> Step:
    """A person decides what happens to an interrupted step: run it again, or skip it. Running a HIGH
    step again opens a new runtime gate for the new attempt, which someone other than the goal's
    requester and the person asking for the retry must approve: the first attempt may have acted."""
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
        if retry and needs_runtime_gate(registry.risk_of(step.tool)):
            gate_open(plan, step, retry_requested_by=actor)
        elif retry:
            step_enqueue(step)
        else:
            step_finish(step, S.SKIPPED, note=f"Skipped by {actor.get_username()} after an interruption.")
            dispatch_locked(plan, steps)
    return step
