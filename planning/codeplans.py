"""Code plans: a dry run for every revision, approval bound to the code and its diff, and applying the
approved diff (never re-running the code) when the plan runs."""

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from approvals import audit
from planning import progress
from planning.models import Goal, Plan, Step
from core.canonical import sha256_of
from sandbox import services as sandbox_services
from sandbox.models import DryRun


def is_code_plan(plan: Plan) -> bool:
    return plan.goal.mode == Goal.Mode.CODE


def current_dry_run(plan: Plan) -> DryRun | None:
    return DryRun.objects.filter(plan_id=plan.pk, revision=plan.revision).order_by("-created_at", "-id").first()


def approval_hash(plan: Plan, dry_run: DryRun | None) -> str:
    """What a countersignature binds to: the steps' hash, and for code plans also the dry run's diff."""
    if not is_code_plan(plan):
        return plan.content_hash
    return sha256_of({"content_hash": plan.content_hash, "effects_hash": dry_run.effects_hash if dry_run else None})


def approval_blocker(plan: Plan, dry_run: DryRun | None) -> str | None:
    if not is_code_plan(plan):
        return None
    if dry_run is None:
        return "The dry run of this revision has not finished yet."
    if not dry_run.succeeded:
        return "The dry run did not succeed, so there is no diff to approve; edit the code or reject the plan."
    if dry_run.status != DryRun.Status.PROPOSED:
        return "This dry run is no longer current; run it again."
    return None


def queue_dry_run(plan_id: int) -> None:
    from planning.tasks import code_dry_run_task

    transaction.on_commit(lambda: code_dry_run_task.delay(plan_id))


def dry_run(plan_id: int) -> DryRun | None:
    plan = Plan.objects.select_related("goal").get(pk=plan_id)
    step = plan.steps.filter(tool="python_sandbox").first()
    if step is None or plan.status not in {Plan.Status.AWAITING_APPROVAL, Plan.Status.APPROVED}:
        return None
    args = step.args
    result = sandbox_services.dry_run_create(
        plan_id=plan.pk,
        revision=plan.revision,
        code=args.get("code", ""),
        table_names=args.get("tables") or ["inventory", "transactions"],
        user_request=args.get("user_request", plan.goal.text),
        timeout_s=settings.COUNTERSIGN_SANDBOX_TIMEOUT_S,
    )
    with transaction.atomic():
        audit.record(
            action="code.dry_run",
            plan_id=plan.pk,
            step_key=step.key,
            data={
                "revision": result.revision,
                "status": result.result.get("status"),
                "code_status": result.result.get("code_status"),
                "effects": len(result.effects),
                "effects_hash": result.effects_hash,
                "code_hash": result.code_hash,
            },
        )
        progress.announce(
            plan.pk, all_steps=True, log=f"Dry run finished: {result.result.get('status')}, {len(result.effects)} change(s) proposed."
        )
    return result


def apply(plan: Plan, actor) -> Plan:
    """Apply the approved diff in one transaction. The caller holds the plan's lock and has checked the
    approval. A conflict applies nothing and sends the plan back for a fresh dry run and approval."""
    from planning.services import _void_approvals

    dry = current_dry_run(plan)
    step = plan.steps.get(tool="python_sandbox")
    now = timezone.now()
    try:
        applied = sandbox_services.dry_run_apply(dry_run=dry)
    except sandbox_services.ApplyConflict as conflict:
        sandbox_services.mark_conflict(dry_run=dry, message=str(conflict))
        _void_approvals(plan, "the tables changed since the dry run")
        plan.status = Plan.Status.AWAITING_APPROVAL
        plan.save(update_fields=["status", "updated_at"])
        audit.record(
            action="code.conflict",
            actor=actor,
            plan_id=plan.pk,
            step_key=step.key,
            data={"effects_hash": dry.effects_hash, "reason": str(conflict)},
        )
        progress.announce(plan.pk, all_steps=True, log=str(conflict))
        return plan
    Step.objects.filter(pk=step.pk).update(
        status=Step.Status.SUCCEEDED,
        started_at=now,
        finished_at=now,
        output={"changes_applied": applied, "STATUS": dry.result.get("code_status", "")},
    )
    plan.status, plan.started_at, plan.finished_at = Plan.Status.SUCCEEDED, now, now
    plan.executing_hash = plan.content_hash
    plan.answer_text = dry.result.get("answer_text", "")[:10_000]
    plan.save(update_fields=["status", "started_at", "finished_at", "executing_hash", "answer_text", "updated_at"])
    audit.record(
        action="code.applied",
        actor=actor,
        plan_id=plan.pk,
        step_key=step.key,
        data={"effects_hash": dry.effects_hash, "changes": applied, "revision": plan.revision},
    )
    progress.announce(plan.pk, all_steps=True, log=f"Applied {applied} change(s) in one transaction.")
    return plan


def refresh(*, plan_id: int, actor) -> None:
    """'Dry run again' (after a conflict, or to see the current data)."""
    from planning.services import ServiceError, _void_approvals

    with transaction.atomic():
        plan = Plan.objects.select_for_update().select_related("goal").get(pk=plan_id)
        if not is_code_plan(plan) or plan.status not in {Plan.Status.AWAITING_APPROVAL, Plan.Status.APPROVED}:
            raise ServiceError("Only a code plan awaiting approval can be dry-run again.", status=409)
        if plan.status == Plan.Status.APPROVED:
            _void_approvals(plan, "a fresh dry run was requested")
            plan.status = Plan.Status.AWAITING_APPROVAL
            plan.save(update_fields=["status", "updated_at"])
        DryRun.objects.filter(plan_id=plan.pk, revision=plan.revision, status=DryRun.Status.PROPOSED).update(
            status=DryRun.Status.SUPERSEDED
        )
        audit.record(action="code.dry_run_requested", actor=actor, plan_id=plan.pk, data={"revision": plan.revision})
        queue_dry_run(plan.pk)
