from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseClientRefresh
from django_htmx.middleware import HtmxDetails

from planning import selectors, services
from planning.forms import GoalForm, PlaybookForm, RetryForm
from planning.models import Plan
from planning.permissions import get_plan_for_user, user_can
from planning.selectors import INBOX_GROUPS


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def _inbox_context(request, form=None) -> dict:
    group = request.GET.get("group", "active")
    group = group if group in INBOX_GROUPS else "active"
    counts = selectors.inbox_counts()
    return {
        "form": form or GoalForm(),
        "group": group,
        "groups": [(name, label, counts[name]) for name, (label, _) in INBOX_GROUPS.items()],
        "page": selectors.inbox_page(group=group, page=request.GET.get("page", 1)),
    }


@require_GET
def inbox(request: HtmxHttpRequest) -> HttpResponse:
    template = "planning/inbox.html"
    if request.htmx and request.htmx.target == "plan-list":
        template += "#plan-list"
    return render(request, template, _inbox_context(request))


@require_POST
def goal_create(request: HtmxHttpRequest) -> HttpResponse:
    if not user_can(request.user, "submit"):
        messages.error(request, "Only operators can submit goals.")
        return redirect("inbox") if not request.htmx else HttpResponseClientRedirect(reverse("inbox"))
    form = GoalForm(request.POST)
    if form.is_valid():
        try:
            plan = services.goal_submit(requester=request.user, text=form.cleaned_data["text"], planner_choice=form.cleaned_data["planner"])
        except services.ServiceError as error:
            form.add_error(None, error.message)
        else:
            url = reverse("plan_detail", args=[plan.pk])
            return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    if request.htmx:
        return render(request, "planning/inbox.html#goal-form", {"form": form}, status=422)
    return render(request, "planning/inbox.html", _inbox_context(request, form=form), status=422)


@require_GET
def plan_detail(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id)
    if request.htmx and request.htmx.target == "plan-status":
        # The page polls while planning; once the plan is drafted, reload to show it whole.
        if plan.status != Plan.Status.PLANNING:
            return HttpResponseClientRefresh()
        return render(request, "planning/plan_detail.html#plan-status", {"plan": plan})
    plan, steps = selectors.plan_with_steps(plan)
    context = {
        "plan": plan,
        "steps": steps,
        "retry_form": RetryForm(),
        "playbook_form": PlaybookForm(initial={"name": plan.goal.text[:200]}),
    }
    context["can_save_playbook"] = user_can(request.user, "approve") and plan.status in services.SAVEABLE_STATUSES
    return render(request, "planning/plan_detail.html", context)


@require_POST
def plan_retry(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id, need="edit")
    form = RetryForm(request.POST)
    choice = form.cleaned_data["planner"] or None if form.is_valid() else None
    try:
        services.plan_retry(plan=plan, actor=request.user, planner_choice=choice)
    except services.ServiceError as error:
        messages.error(request, error.message)
    return redirect("plan_detail", plan_id=plan.pk)


@require_POST
def playbook_save(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id, need="approve")
    form = PlaybookForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Give the playbook a name of at most 200 characters.")
        return redirect("plan_detail", plan_id=plan.pk)
    try:
        playbook = services.playbook_save_from_plan(plan=plan, actor=request.user, name=form.cleaned_data["name"])
    except services.ServiceError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Saved as playbook “{playbook.name}”.")
    return redirect("plan_detail", plan_id=plan.pk)


@require_GET
def playbook_list(request: HtmxHttpRequest) -> HttpResponse:
    if not user_can(request.user, "view"):
        raise PermissionDenied("You may not view playbooks.")
    return render(request, "planning/playbooks.html", {"playbooks": selectors.playbooks()})
