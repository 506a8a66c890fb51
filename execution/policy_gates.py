"""Runtime gates and the policies around them: whether a ready step waits at a gate (HIGH always, and
any step a policy gates, judged on its resolved arguments), and whether a standing grant decides it."""

from django.conf import settings

from approvals import audit, grants
from approvals.models import Approval
from planning.approval_rules import plan_verdicts_for_call, user_groups
from planning.models import Plan, Step


def gate_required(plan: Plan, step: Step) -> bool:
    return plan_verdicts_for_call(plan, step).gate_required


def gate_refusal(plan: Plan, step: Step, actor) -> str | None:
    """Why the policies do not let `actor` approve this gate (a forbid on decide_gate, or groups that
    a policy names for it), or None."""
    verdict = plan_verdicts_for_call(plan, step, user=actor)
    if verdict.gate_denials:
        denial = verdict.gate_denials[0]
        return f"Policy {denial.policy} does not let you approve this gate: {denial.reason}"
    if verdict.gate_groups and not user_groups(actor) & verdict.gate_groups:
        return f"Only group {', '.join(sorted(verdict.gate_groups))} may approve this gate."
    return None


def gate_decided_by_grant(plan: Plan, step: Step) -> bool:
    """Approve the gate `step` just opened when a live standing grant covers its call: one use of the
    grant is spent, the approval names it, and the step shows it. The caller queues the step."""
    excluded = {plan.goal.requester_id, *plan.author_ids()}
    grant = grants.grant_use(
        tool=step.tool, args=step.resolved_args or {}, excluded_user_ids=excluded if settings.COUNTERSIGN_FOUR_EYES else set()
    )
    if grant is None:
        return False
    left = "no limit on uses" if grant.uses_left is None else f"{grant.uses_left} use{'s' if grant.uses_left != 1 else ''} left"
    reason = f"Approved by standing grant #{grant.pk} from {grant.created_by.get_username()} ({left})"
    Approval.objects.create(
        plan=plan,
        step=step,
        kind=Approval.Kind.GATE,
        decision=Approval.Decision.APPROVED,
        comment=reason,
        approver=grant.created_by,
        revision=plan.revision,
        content_hash=step.gate_hash,
    )
    audit.record(
        action="gate.approved_by_grant",
        plan_id=plan.pk,
        step_key=step.key,
        data={
            "risk": step.risk,
            "gate_hash": step.gate_hash,
            "resolved_args": step.resolved_args,
            "reason": reason,
            **grants.grant_summary(grant),
        },
    )
    step.note = reason + "."
    step.save(update_fields=["note"])
    return True
