"""Reads for the inbox and the plan page. Each page's query count is fixed, whatever the plan's size."""

from django.core.paginator import Paginator
from django.db.models import Count, Exists, OuterRef, Q

from approvals.models import Approval, AuditEvent
from core.roles import user_can
from planning.diff import StepChanges, changes_since_proposal, diff_contents
from planning.models import Plan, PlanRevision, Playbook, Step, plan_content
from planning.validation import PlanInvalid, validate_plan

NEEDS_ATTENTION = [Plan.Status.PLANNING_FAILED, Plan.Status.FAILED, Plan.Status.PARTIALLY_COMPLETED, Plan.Status.REJECTED]


def _inbox_filters(user) -> dict[str, tuple[str, Q]]:
    authored = Exists(PlanRevision.objects.filter(plan=OuterRef("pk"), author=user))
    filters = {}
    if user_can(user, "approve"):
        filters["to_approve"] = ("Awaiting my approval", Q(status=Plan.Status.AWAITING_APPROVAL) & ~Q(goal__requester=user) & ~Q(authored))
    if user_can(user, "submit"):
        filters["mine"] = ("My goals", Q(goal__requester=user))
    filters["awaiting"] = ("Awaiting approval", Q(status=Plan.Status.AWAITING_APPROVAL))
    filters["changes"] = ("Changes requested", Q(status=Plan.Status.CHANGES_REQUESTED))
    filters["ready"] = ("Approved, not started", Q(status=Plan.Status.APPROVED))
    filters["running"] = ("Running", Q(status=Plan.Status.RUNNING))
    filters["attention"] = ("Needs attention", Q(status__in=NEEDS_ATTENTION))
    filters["recent"] = ("Recent", Q())
    return filters


def inbox_tabs(user) -> list[tuple[str, str, int]]:
    filters = _inbox_filters(user)
    counts = Plan.objects.aggregate(**{name: Count("id", filter=condition) for name, (_, condition) in filters.items()})
    return [(name, label, counts[name]) for name, (label, _) in filters.items()]


def default_tab(user) -> str:
    return next(iter(_inbox_filters(user)))


def inbox_page(*, user, group: str, page: int | str = 1, per_page: int = 20):
    filters = _inbox_filters(user)
    _, condition = filters.get(group, filters["recent"])
    plans = Plan.objects.filter(condition).select_related("goal", "goal__requester").annotate(step_count=Count("steps"))
    return Paginator(plans.order_by("-updated_at", "-id"), per_page).get_page(page)


def plan_with_steps(plan: Plan) -> tuple[Plan, list]:
    return plan, list(plan.steps.all())


def plan_approvals(plan: Plan) -> list[Approval]:
    return list(plan.approvals.select_related("approver").order_by("-created_at"))


def revision_author_ids(plan: Plan) -> set[int]:
    return plan.author_ids()


def stored_plan_issues(steps) -> dict[str, list[str]]:
    """Problems with the stored steps (say, a tool that has since been unregistered), by step key."""
    if not steps:
        return {}
    try:
        validate_plan({"steps": plan_content(steps)}, max_steps=max(len(steps), 1))
    except PlanInvalid as invalid:
        found: dict[str, list[str]] = {}
        for issue in invalid.issues:
            found.setdefault(issue.step_key or "", []).append(f"{issue.field}: {issue.message}" if issue.field else issue.message)
        return found
    return {}


def revision_pair(plan: Plan, revisions: list[PlanRevision], a, b, view) -> dict:
    """Which two revisions to compare, and their differences. view=approved compares the planner's
    last proposal with the revision most recently approved."""
    by_number = {r.number: r for r in revisions}
    if not revisions:
        return {"left": None, "right": None, "changes": []}
    if view == "approved":
        proposed = [r for r in revisions if r.planner != Plan.Planner.HUMAN] or revisions[:1]
        approved = plan.approvals.filter(kind=Approval.Kind.PLAN, decision=Approval.Decision.APPROVED).order_by("-created_at").first()
        left = proposed[-1]
        right = by_number.get(approved.revision) if approved else None
        if right is None:
            return {"left": left, "right": None, "changes": [], "view": "approved"}
    else:
        try:
            left = by_number.get(int(a)) if a else None
            right = by_number.get(int(b)) if b else None
        except ValueError:
            left = right = None
        right = right or revisions[-1]
        left = left or (revisions[-2] if len(revisions) > 1 else revisions[-1])
    return {"left": left, "right": right, "changes": diff_contents(left.content, right.content), "view": view or ""}


def proposal_changes(plan: Plan) -> list[StepChanges]:
    """What people changed since the planner's latest proposal, per step, with who changed it."""
    return changes_since_proposal(list(plan.revisions.select_related("author").order_by("number")))


def plan_events(plan: Plan, limit: int = 40):
    return list(AuditEvent.objects.filter(plan_id=plan.pk).order_by("-seq")[:limit])


def waiting_gates():
    return (
        Step.objects.filter(status=Step.Status.WAITING_APPROVAL, plan__status=Plan.Status.RUNNING)
        .select_related("plan", "plan__goal")
        .order_by("queued_at", "id")
    )


def playbooks():
    return Playbook.objects.select_related("created_by").order_by("name")
