"""One permission helper per object: every view, API route and consumer that touches a plan calls it."""

from django.core.exceptions import PermissionDenied
from django.http import Http404

from core.roles import user_can
from planning.models import Plan

MESSAGES = {
    "view": "You may not view plans.",
    "edit": "Only operators can edit plans.",
    "approve": "Only approvers can countersign plans.",
    "run": "Only operators can run or cancel plans.",
}


def get_plan_for_user(user, plan_id: int, *, need: str = "view", queryset=None) -> Plan:
    """The plan, if the user may do `need` with it; PermissionDenied or Http404 otherwise."""
    if not user_can(user, "view"):
        raise PermissionDenied(MESSAGES["view"])
    if need != "view" and not user_can(user, need):
        raise PermissionDenied(MESSAGES[need])
    plan = (queryset if queryset is not None else Plan.objects.select_related("goal", "goal__requester")).filter(pk=plan_id).first()
    if plan is None:
        raise Http404("No such plan.")
    return plan
