"""Code plans under review: a dry run for every revision, and approval bound to the code and its diff.
(Applying the approved diff when the plan runs is execution's job: execution/code_apply.py.)"""

from django.conf import settings
from django.db import transaction

from approvals import audit
from approvals.services import plan_approvals_void
from core import jobs
from core.canonical import sha256_of
from core.errors import ServiceError
from planning import broadcast
from planning.models import Goal, Plan
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


def dry_run_blocker(plan: Plan, dry_run: DryRun | None) -> str | None:
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
    jobs.enqueue("planning.tasks.code_dry_run_task", plan_id)


def dry_run_perform(plan_id: int) -> DryRun | None:
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
        broadcast.announce(
            plan.pk, all_steps=True, log=f"Dry run finished: {result.result.get('status')}, {len(result.effects)} change(s) proposed."
        )
    return result


def dry_run_refresh(*, plan_id: int, actor) -> None:
    """'Dry run again' (after a conflict, or to see the current data)."""
    with transaction.atomic():
        plan = Plan.objects.select_for_update().select_related("goal").get(pk=plan_id)
        if not is_code_plan(plan) or plan.status not in {Plan.Status.AWAITING_APPROVAL, Plan.Status.APPROVED}:
            raise ServiceError("Only a code plan awaiting approval can be dry-run again.", status=409)
        if plan.status == Plan.Status.APPROVED:
            plan_approvals_void(plan_id=plan.pk, reason="a fresh dry run was requested")
            plan.status = Plan.Status.AWAITING_APPROVAL
            plan.save(update_fields=["status", "updated_at"])
        DryRun.objects.filter(plan_id=plan.pk, revision=plan.revision, status=DryRun.Status.PROPOSED).update(
            status=DryRun.Status.SUPERSEDED
        )
        audit.record(action="code.dry_run_requested", actor=actor, plan_id=plan.pk, data={"revision": plan.revision})
        queue_dry_run(plan.pk)
