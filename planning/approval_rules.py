"""What the approval policies say about a plan: the facts planning hands to approvals.policies, the
approvals a revision still needs (M-of-N), and why a person may not approve it."""

from approvals import policies
from approvals.models import Approval, AuditEvent
from planning.models import Plan, Step
from planning.provenance import plan_provenance, untrusted_arguments
from tools.amounts import estimated_amount
from tools.registry import registry


def user_groups(user) -> set[str]:
    if user is None or not getattr(user, "is_authenticated", False):
        return set()
    return set(user.groups.values_list("name", flat=True))


def step_facts(plan: Plan, step: Step, *, args: dict | None = None, untrusted: bool = False) -> policies.StepFacts:
    """Facts about one step; `args` are its resolved arguments once known (at a gate); `untrusted` whether
    untrusted data reaches an argument or the condition."""
    tool = registry.get(step.tool)
    arguments = step.args if args is None else args
    return policies.StepFacts(
        plan_id=plan.pk,
        key=step.key,
        tool=step.tool,
        source=tool.source if tool else "",
        risk=str(registry.risk_of(step.tool).value),
        requester=plan.goal.requester.get_username(),
        args=arguments if isinstance(arguments, dict) else {},
        resolved=args is not None,
        amount=estimated_amount(step.tool, arguments) if isinstance(arguments, dict) else None,
        untrusted_input=untrusted,
    )


def plan_verdicts(plan: Plan, steps=None, user=None) -> dict[str, policies.StepVerdict]:
    steps = list(plan.steps.all()) if steps is None else list(steps)
    provenance = plan_provenance(steps)
    facts = [step_facts(plan, step, untrusted=bool(untrusted_arguments(provenance[step.key]))) for step in steps]
    principal = user.get_username() if user is not None and user.is_authenticated else ""
    verdicts = policies.evaluate(facts, principal=principal, groups=user_groups(user))
    return {verdict.key: verdict for verdict in verdicts}


def current_approvers(approvals) -> dict[str, set[str]]:
    """Distinct approvers among `approvals` (username -> their groups)."""
    approvers = {}
    for approval in approvals:
        if approval.approver.get_username() not in approvers:
            approvers[approval.approver.get_username()] = user_groups(approval.approver)
    return approvers


def valid_approvals(plan: Plan, expected_hash: str):
    return Approval.objects.filter(
        plan=plan,
        kind=Approval.Kind.PLAN,
        decision=Approval.Decision.APPROVED,
        voided_at__isnull=True,
        content_hash=expected_hash,
        revision=plan.revision,
    ).select_related("approver")


def approval_progress(plan: Plan, expected_hash: str, verdicts=None) -> policies.ApprovalProgress:
    verdicts = plan_verdicts(plan) if verdicts is None else verdicts
    requirements = policies.plan_requirements(list(verdicts.values()))
    return policies.approval_progress(requirements, current_approvers(valid_approvals(plan, expected_hash)))


def denial_of(verdicts: dict[str, policies.StepVerdict]) -> str | None:
    for key, verdict in verdicts.items():
        if verdict.denials:
            denial = verdict.denials[0]
            return f"Policy {denial.policy} denies step {key}: {denial.reason}"
    return None


def approval_refusal(*, plan: Plan, user, expected_hash: str) -> str | None:
    """Why the policies do not let `user` approve this revision (a denied step, an approval they already
    gave, or groups that no unmet requirement accepts), or None."""
    verdicts = plan_verdicts(plan, user=user)
    denial = denial_of(verdicts)
    if denial:
        return denial
    approvers = current_approvers(valid_approvals(plan, expected_hash))
    if user.get_username() in approvers:
        return "You already approved this revision; it needs another approver."
    requirements = policies.plan_requirements(list(verdicts.values()))
    if not policies.useful_approver(requirements, approvers, user_groups(user)):
        progress = policies.approval_progress(requirements, approvers)
        return f"{progress.describe()}: your approval does not count towards what is missing."
    return None


def shadow_report(verdicts: dict[str, policies.StepVerdict]) -> list[dict]:
    """What shadow-mode policies would have decided, for the audit trail."""
    return [
        {
            "step": key,
            "policy": applied.policy,
            "file": applied.file,
            "action": applied.action,
            "effect": applied.effect,
            "reason": applied.reason,
        }
        for key, verdict in verdicts.items()
        for applied in verdict.shadow
    ]


def decision_outcome(plan: Plan, expected_hash: str) -> dict:
    """After an approval: whether the revision now has every approval its policies require, and what
    shadow policies would have decided (recorded with the approval, never enforced)."""
    verdicts = plan_verdicts(plan)
    progress = approval_progress(plan, expected_hash, verdicts)
    requirements = policies.plan_requirements(list(verdicts.values()))
    outcome = {
        "complete": progress.complete,
        "approvals": progress.describe(),
        "required_by": [{"policy": r.policy, "count": r.count, "groups": list(r.groups), "reason": r.reason} for r in requirements],
    }
    shadow = shadow_report(verdicts)
    if shadow:
        outcome["shadow_policies"] = shadow
    return outcome


def page_context(plan: Plan, steps, user, expected_hash: str) -> dict:
    """The plan page's view of the policies: per step what applied and why, the approvals so far, and
    what stops this user from approving."""
    verdicts = plan_verdicts(plan, steps, user=user)
    granted = dict(
        AuditEvent.objects.filter(plan_id=plan.pk, action="gate.approved_by_grant").order_by("seq").values_list("step_key", "data__reason")
    )
    for step in steps:
        step.policy_verdict, step.grant_decision = verdicts.get(step.key), granted.get(step.key)
    context = {"step_policies": verdicts, "approval_progress": approval_progress(plan, expected_hash, verdicts)}
    if plan.status == Plan.Status.AWAITING_APPROVAL and user.is_authenticated:
        context["policy_refusal"] = approval_refusal(plan=plan, user=user, expected_hash=expected_hash)
    return context


def plan_verdicts_for_call(plan: Plan, step: Step, user=None) -> policies.StepVerdict:
    """The verdict on one step's call with its resolved arguments (at run time, at its gate)."""
    provenance = step.provenance if step.provenance is not None else plan_provenance(list(plan.steps.all())).get(step.key, {})
    facts = step_facts(
        plan,
        step,
        args=step.resolved_args if step.resolved_args is not None else step.args,
        untrusted=bool(untrusted_arguments(provenance)),
    )
    principal = user.get_username() if user is not None else ""
    return policies.evaluate([facts], principal=principal, groups=user_groups(user))[0]
