"""Reads for the inbox and the plan page. Each page's query count is fixed, whatever the plan's size."""

from django.core.paginator import Paginator
from django.db.models import Count, Q

from planning.models import Plan, Playbook

INBOX_GROUPS = {
    "active": ("In progress", [Plan.Status.PLANNING, Plan.Status.AWAITING_APPROVAL, Plan.Status.APPROVED, Plan.Status.RUNNING]),
    "awaiting": ("Awaiting approval", [Plan.Status.AWAITING_APPROVAL]),
    "running": ("Running", [Plan.Status.APPROVED, Plan.Status.RUNNING]),
    "failed": ("Needs attention", [Plan.Status.PLANNING_FAILED, Plan.Status.FAILED]),
    "done": ("Finished", [Plan.Status.SUCCEEDED, Plan.Status.CANCELLED, Plan.Status.SUPERSEDED]),
    "all": ("All", None),
}


def inbox_counts() -> dict[str, int]:
    aggregates = {name: Count("id", filter=Q(status__in=statuses)) for name, (_, statuses) in INBOX_GROUPS.items() if statuses}
    counts = Plan.objects.aggregate(all=Count("id"), **aggregates)
    return counts


def inbox_page(*, group: str, page: int | str = 1, per_page: int = 20):
    _, statuses = INBOX_GROUPS.get(group, INBOX_GROUPS["active"])
    plans = Plan.objects.select_related("goal", "goal__requester").annotate(step_count=Count("steps")).order_by("-updated_at", "-id")
    if statuses:
        plans = plans.filter(status__in=statuses)
    return Paginator(plans, per_page).get_page(page)


def plan_with_steps(plan: Plan) -> tuple[Plan, list]:
    return plan, list(plan.steps.all())


def playbooks():
    return Playbook.objects.select_related("created_by").order_by("name")
