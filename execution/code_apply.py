"""Running a code plan: apply its approved diff in one transaction (the code itself never runs again)."""

from django.utils import timezone

from approvals import audit
from approvals.services import plan_approvals_void
from execution.transitions import step_transition
from planning import broadcast, dry_runs
from planning.models import Plan, Step
from sandbox import services as sandbox_services


def code_plan_apply(plan: Plan, actor) -> Plan:
    """Apply the approved diff in one transaction. The caller holds the plan's lock and has checked the
    approval. A conflict applies nothing and sends the plan back for a fresh dry run and approval."""
    dry = dry_runs.current_dry_run(plan)
    step = plan.steps.get(tool="python_sandbox")
    now = timezone.now()
    try:
        applied = sandbox_services.dry_run_apply(dry_run=dry)
    except sandbox_services.ApplyConflict as conflict:
        sandbox_services.mark_conflict(dry_run=dry, message=str(conflict))
        plan_approvals_void(plan_id=plan.pk, reason="the tables changed since the dry run")
        plan.status = Plan.Status.AWAITING_APPROVAL
        plan.save(update_fields=["status", "updated_at"])
        audit.record(
            action="code.conflict",
            actor=actor,
            plan_id=plan.pk,
            step_key=step.key,
            data={"effects_hash": dry.effects_hash, "reason": str(conflict)},
        )
        broadcast.announce(plan.pk, all_steps=True, log=str(conflict))
        return plan
    # The code's one step is applied, not run: it succeeds with the diff's outcome as its output. Its own
    # event is the code.applied below, so the transition records none.
    step_transition(
        step,
        Step.Status.SUCCEEDED,
        fields={"started_at": now, "finished_at": now, "output": {"changes_applied": applied, "STATUS": dry.result.get("code_status", "")}},
        action=None,
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
    broadcast.announce(plan.pk, all_steps=True, log=f"Applied {applied} change(s) in one transaction.")
    return plan
