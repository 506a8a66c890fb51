"""Countersigning a plan: decisions bound to the exact revision hash on screen, under the four-eyes
rule. The decision changes the plan's status, so it lives with the plan (approvals keeps the records)."""

from django.db import transaction
from django.db.models import Exists, OuterRef

from approvals import audit
from approvals.models import Approval
from approvals.policy import four_eyes_violation
from core.errors import ServiceError
from core.roles import user_can
from core.text import refuse_control_characters
from planning import approval_rules, broadcast, dry_runs, preflight
from planning.models import Plan
from planning.services import StaleRevision

DECISION_ACTIONS = {
    Approval.Decision.APPROVED: "plan.approved",
    Approval.Decision.REJECTED: "plan.rejected",
    Approval.Decision.CHANGES_REQUESTED: "plan.changes_requested",
}


def revision_authors(plan: Plan) -> set[int]:
    return plan.author_ids()


def approval_blocker(*, plan: Plan, user, authors: set[int] | None = None) -> str | None:
    """Why `user` cannot decide on `plan` now, or None when they can."""
    if not user_can(user, "approve"):
        return "Only approvers can countersign plans."
    if plan.status != Plan.Status.AWAITING_APPROVAL:
        return f"The plan is {plan.get_status_display().lower()}, not awaiting approval."
    if not plan.content_hash or not plan.steps.exists():
        return "The plan has no steps yet: add one before it can be countersigned."
    return four_eyes_violation(
        approver=user, author_ids=revision_authors(plan) if authors is None else authors, requester_id=plan.goal.requester_id
    )


def plan_decision_record(*, plan_id: int, actor, revision: int, content_hash: str | None, decision: str, comment: str = "") -> Approval:
    if decision not in DECISION_ACTIONS:
        raise ServiceError("Decide approved, rejected or changes_requested.", status=422)
    comment = (comment or "").strip()
    refuse_control_characters(comment, field="comment")
    if decision != Approval.Decision.APPROVED and not comment:
        raise ServiceError("Say why in a comment, so the operator knows what to change.", status=422)
    with transaction.atomic():
        plan = Plan.objects.select_for_update().select_related("goal").get(pk=plan_id)
        dry_run = dry_runs.current_dry_run(plan) if dry_runs.is_code_plan(plan) else None
        expected = dry_runs.approval_hash(plan, dry_run)
        if revision != plan.revision or (content_hash is not None and content_hash not in {expected, plan.content_hash}):
            raise StaleRevision(plan.revision)
        if content_hash is not None and content_hash != expected:
            raise ServiceError("The dry-run diff changed since you looked; reload the plan.", status=409)
        blocker = approval_blocker(plan=plan, user=actor)
        if blocker:
            raise ServiceError(blocker, status=403 if "approvers" in blocker or "Four-eyes" in blocker else 409)
        code_blocker = dry_runs.dry_run_blocker(plan, dry_run)
        if code_blocker and decision == Approval.Decision.APPROVED:
            raise ServiceError(code_blocker, status=409)
        refusal = approval_rules.approval_refusal(plan=plan, user=actor, expected_hash=expected) if decision == "approved" else None
        if refusal:
            raise ServiceError(refusal, status=403)
        serious = preflight.high_findings(plan.preflight)
        if serious and decision == Approval.Decision.APPROVED and not comment:
            raise ServiceError(
                f"Preflight found {len(serious)} high-severity problem{'s' if len(serious) > 1 else ''} "
                f"({serious[0]['step'] or 'plan'}: {serious[0]['message']}). Say in a comment why you approve it anyway.",
                status=422,
            )
        approval = Approval.objects.create(
            plan=plan,
            kind=Approval.Kind.PLAN,
            decision=decision,
            comment=comment[:5000],
            approver=actor,
            revision=plan.revision,
            content_hash=expected,
        )
        policy_outcome = approval_rules.decision_outcome(plan, expected) if decision == "approved" else {}
        if decision == Approval.Decision.APPROVED:
            plan.status = Plan.Status.APPROVED if policy_outcome["complete"] else plan.status
        elif decision == Approval.Decision.REJECTED:
            plan.status = Plan.Status.REJECTED
        else:
            plan.status = Plan.Status.CHANGES_REQUESTED
        plan.save(update_fields=["status", "updated_at"])
        audit.record(
            action=DECISION_ACTIONS[decision],
            actor=actor,
            plan_id=plan.pk,
            data={
                "revision": plan.revision,
                "content_hash": plan.content_hash,
                "approved_hash": expected,
                "comment": comment[:5000],
                **policy_outcome,
                # What the approver acknowledged with their comment.
                **({"preflight_high": [f"{f['step']}: {f['check']}" for f in serious]} if serious else {}),
            },
        )
        broadcast.announce(plan.pk, log=f"{actor.get_username()}: {approval.get_decision_display().lower()} (revision {plan.revision}).")
    return approval


def plan_resubmit(*, plan_id: int, actor) -> Plan:
    """The operator sends a plan whose changes were requested back for approval, as it is (after edits,
    or after answering the comment some other way)."""
    if not user_can(actor, "edit"):
        raise ServiceError("Only operators can resubmit plans.", status=403)
    with transaction.atomic():
        plan = Plan.objects.select_for_update().get(pk=plan_id)
        if plan.status != Plan.Status.CHANGES_REQUESTED:
            raise ServiceError(
                f"Only a plan with changes requested can be resubmitted; this one is {plan.get_status_display().lower()}.", status=409
            )
        plan.status = Plan.Status.AWAITING_APPROVAL
        plan.save(update_fields=["status", "updated_at"])
        audit.record(
            action="plan.resubmitted", actor=actor, plan_id=plan.pk, data={"revision": plan.revision, "content_hash": plan.content_hash}
        )
        broadcast.announce(plan.pk, log=f"Resubmitted for approval by {actor.get_username()}.")
    return plan


def changes_request(plan: Plan) -> Approval | None:
    """The request for changes the operator is answering, while the plan waits for them."""
    if plan.status != Plan.Status.CHANGES_REQUESTED:
        return None
    return (
        Approval.objects.filter(plan=plan, kind=Approval.Kind.PLAN, decision=Approval.Decision.CHANGES_REQUESTED)
        .select_related("approver")
        .order_by("-created_at")
        .first()
    )


def approval_still_binds(plan_path: str) -> Exists:
    """For a query over rows that lead to a plan by `plan_path` (a step: "plan"): whether a plan approval
    still binds the plan's current revision and content hash, in one subquery. A claim checks this on
    every step of a run; the whole check (`valid_plan_approval`: the dry run of a code plan, the M-of-N
    requirements of the policies) ran when the run started, and every later edit, replan or fresh dry
    run voids the approvals (or moves the hash), which this sees. False for a code plan, whose approval
    binds its diff too: there the caller falls back to the whole check."""
    return Exists(
        Approval.objects.filter(
            plan_id=OuterRef(f"{plan_path}_id"),
            kind=Approval.Kind.PLAN,
            decision=Approval.Decision.APPROVED,
            voided_at__isnull=True,
            content_hash=OuterRef(f"{plan_path}__content_hash"),
            revision=OuterRef(f"{plan_path}__revision"),
        )
    )


def valid_plan_approval(plan: Plan) -> Approval | None:
    """The approval that covers the plan's current content, if any (not voided, same hash and revision;
    for code plans the hash also covers the dry run's diff)."""
    expected = dry_runs.approval_hash(plan, dry_runs.current_dry_run(plan))
    latest = approval_rules.valid_approvals(plan, expected).order_by("-created_at").first()
    # M-of-N: one approval covers the plan only once the policies' required approvers have all signed.
    return latest if latest is not None and approval_rules.approval_progress(plan, expected).complete else None
