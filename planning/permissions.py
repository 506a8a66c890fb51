"""One permission helper per object: every view, API route and consumer that touches a plan calls it."""

from django.core.exceptions import PermissionDenied
from django.http import Http404

from core.roles import user_can
from planning.models import Goal, Plan

MESSAGES = {
    "view": "You may not view plans.",
    "edit": "Only operators can edit plans.",
    "approve": "Only approvers can countersign plans.",
    "run": "Only operators can run or cancel plans.",
    "edit_steps": "Only operators, and approvers during review, can edit plans.",
}
REVIEW_ONLY = "Approvers can edit a plan only while it awaits approval."


def may_edit_steps(user, plan: Plan) -> str | None:
    """Why `user` may not edit `plan`'s steps now, or None. Operators edit any editable plan; an approver
    edits during review (the edit makes them an author of the revision, so someone else countersigns)."""
    if user_can(user, "edit"):
        return None if plan.is_editable else f"A plan that is {plan.get_status_display().lower()} cannot be edited."
    if not user_can(user, "approve"):
        return MESSAGES["edit_steps"]
    return None if plan.status == Plan.Status.AWAITING_APPROVAL else REVIEW_ONLY


def get_plan_for_user(user, plan_id: int, *, need: str = "view", queryset=None) -> Plan:
    """The plan, if the user may do `need` with it; PermissionDenied or Http404 otherwise."""
    if not user_can(user, "view"):
        raise PermissionDenied(MESSAGES["view"])
    if need == "edit_steps" and not (user_can(user, "edit") or user_can(user, "approve")):
        raise PermissionDenied(MESSAGES[need])
    if need not in {"view", "edit_steps"} and not user_can(user, need):
        raise PermissionDenied(MESSAGES[need])
    plan = (queryset if queryset is not None else Plan.objects.select_related("goal", "goal__requester")).filter(pk=plan_id).first()
    if plan is None:
        raise Http404("No such plan.")
    if need == "edit_steps" and not user_can(user, "edit") and plan.status != Plan.Status.AWAITING_APPROVAL:
        raise PermissionDenied(REVIEW_ONLY)
    return plan


def get_goal_for_user(user, goal_id: int, *, need: str = "view") -> Goal:
    """The goal, if the user may do `need` with its plans (choosing an alternative is an edit)."""
    if not user_can(user, "view"):
        raise PermissionDenied(MESSAGES["view"])
    if need != "view" and not user_can(user, need):
        raise PermissionDenied(MESSAGES[need])
    goal = Goal.objects.select_related("requester").filter(pk=goal_id).first()
    if goal is None:
        raise Http404("No such goal.")
    return goal
