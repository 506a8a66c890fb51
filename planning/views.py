from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseClientRefresh, reswap, retarget

from core.errors import ServiceError
from core.risk import Risk
from core.roles import user_can
from planning import dry_runs, plan_page, review, selectors, services
from planning.forms import DecisionForm, GoalForm, PlaybookForm, RetryForm
from planning.models import Plan
from planning.permissions import get_goal_for_user, get_plan_for_user
from planning.plan_page import HtmxHttpRequest

DECISION_TEXT = {
    "approved": "You approved revision {revision}.",
    "rejected": "You rejected revision {revision}.",
    "changes_requested": "You requested changes to revision {revision}; the operator sees your comment.",
}


def _inbox_context(request, form=None) -> dict:
    tabs = selectors.inbox_tabs(request.user)
    group = request.GET.get("group") or selectors.default_tab(request.user)
    group = group if any(name == group for name, _, _ in tabs) else "recent"
    return {
        "form": form or GoalForm(),
        "gates": list(selectors.waiting_gates()[:50]) if user_can(request.user, "approve") else [],
        "group": group,
        "groups": tabs,
        "page": selectors.inbox_page(user=request.user, group=group, page=request.GET.get("page", 1)),
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
            plan = services.goal_submit(
                requester=request.user,
                text=form.cleaned_data["text"],
                planner_choice=form.cleaned_data["planner"],
                mode=form.cleaned_data["mode"] or "steps",
                alternatives=form.cleaned_data["alternatives"] or 1,
            )
        except ServiceError as error:
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
    if request.htmx and request.htmx.target == "dry-run":
        # A code plan's page polls until its dry run is in, then reloads to show the diff and approval.
        if dry_runs.current_dry_run(plan) is not None:
            return HttpResponseClientRefresh()
        return render(request, "planning/_dry_run.html", {"plan": plan, "dry_run": None})
    return render(request, "planning/plan_detail.html", plan_page.plan_context(request, plan))


def _apply_edit(request: HtmxHttpRequest, plan: Plan, perform, *, form=None, form_key: str | None = None) -> HttpResponse:
    """Run an edit service and answer: the refreshed plan on success, the form with errors (422), or
    the conflict message (409). Non-htmx requests get a redirect with a flash message."""
    try:
        plan = perform()
    except services.InvalidEdit as invalid:
        if form is not None:
            for issue in invalid.issues:
                field = issue.field.split(".")[0] if issue.field.split(".")[0] in form.fields else None
                prefix = "" if field else (f"Step {issue.step_key}: " if issue.step_key and issue.step_key != form_key else "")
                form.add_error(field, prefix + issue.message)
        if not request.htmx:
            messages.error(request, invalid.message)
            return redirect("plan_detail", plan_id=plan.pk)
        if form is None:
            return plan_page.conflict(request, plan, invalid.message, status=422)
        response = render(request, "planning/_step_form.html", {"plan": plan, "form": form, "key": form_key}, status=422)
        return retarget(reswap(response, "outerHTML"), f"#step-{form_key or 'new'}")
    except ServiceError as error:
        return plan_page.refused(request, plan, error.message, error.status)
    saved = f"Saved as revision {plan.revision}. Earlier approvals no longer apply."
    if user_can(request.user, "approve"):
        saved += " You edited it, so another approver must countersign it."
    if not request.htmx:
        messages.success(request, saved)
        return redirect("plan_detail", plan_id=plan.pk)
    return plan_page.render_plan_body(request, plan, flash=saved)


@require_http_methods(["GET", "POST"])
def step_edit(request: HtmxHttpRequest, plan_id: int, key: str) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id, need="edit_steps")
    steps = list(plan.steps.all())
    if not any(s.key == key for s in steps):
        raise Http404("No such step.")
    if request.method == "GET":
        # The Edit button sends the revision its page shows: a stale tab hears about it before typing.
        shown = request.GET.get("revision")
        if shown is not None and shown != str(plan.revision):
            return plan_page.conflict(request, plan, services.StaleRevision(plan.revision).message)
        return render(request, "planning/_step_form.html", {"plan": plan, "form": plan_page.step_form(plan, steps, key=key), "key": key})
    form = plan_page.step_form(plan, steps, key=key, data=request.POST)
    if not form.is_valid():
        return render(request, "planning/_step_form.html", {"plan": plan, "form": form, "key": key}, status=422)
    revision = form.cleaned_data["revision"]
    return _apply_edit(
        request,
        plan,
        lambda: services.step_update(plan_id=plan.pk, actor=request.user, revision=revision, key=key, changes=form.changes()),
        form=form,
        form_key=key,
    )


@require_GET
def step_view(request: HtmxHttpRequest, plan_id: int, key: str) -> HttpResponse:
    """The read-only card again (Cancel in the edit form)."""
    plan = get_plan_for_user(request.user, plan_id)
    context = plan_page.plan_context(request, plan)
    step = next((s for s in context["steps"] if s.key == key), None)
    if step is None:
        raise Http404("No such step.")
    return render(request, "planning/_step.html", {**context, "step": step})


@require_http_methods(["GET", "POST"])
def step_add(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id, need="edit_steps")
    if request.method == "GET":
        # The empty form, fetched when "Add a step" is opened (or as a page of its own without htmx).
        if request.htmx:
            form = plan_page.step_form(plan, list(plan.steps.all()), key=None)
            return render(request, "planning/_step_form.html", {"plan": plan, "form": form, "key": None})
        context = plan_page.plan_context(request, plan)
        context["add_form"] = plan_page.step_form(plan, context["steps"], key=None)
        return render(request, "planning/plan_detail.html", context)
    form = plan_page.step_form(plan, list(plan.steps.all()), key=None, data=request.POST)
    if not form.is_valid():
        response = render(request, "planning/_step_form.html", {"plan": plan, "form": form, "key": None}, status=422)
        return retarget(reswap(response, "outerHTML"), "#step-new") if request.htmx else response
    revision = form.cleaned_data["revision"]
    return _apply_edit(
        request, plan, lambda: services.step_add(plan_id=plan.pk, actor=request.user, revision=revision, step=form.changes()), form=form
    )


def _revision_from(request) -> int:
    try:
        return int(request.POST.get("revision", ""))
    except ValueError:
        return -1


@require_POST
def step_delete(request: HtmxHttpRequest, plan_id: int, key: str) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id, need="edit_steps")
    revision = _revision_from(request)
    return _apply_edit(request, plan, lambda: services.step_delete(plan_id=plan.pk, actor=request.user, revision=revision, key=key))


@require_POST
def step_decompose(request: HtmxHttpRequest, plan_id: int, key: str) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id, need="edit_steps")
    revision = _revision_from(request)
    return plan_page.perform_action(
        request,
        plan,
        lambda: services.step_decompose_request(plan_id=plan.pk, actor=request.user, revision=revision, key=key),
        done=f"The planner is decomposing {key}; its sub-plan arrives as a new revision shown as a diff, and needs approval.",
    )


@require_POST
def step_move(request: HtmxHttpRequest, plan_id: int, key: str) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id, need="edit_steps")
    revision, direction = _revision_from(request), request.POST.get("direction", "")
    return _apply_edit(
        request, plan, lambda: services.step_move(plan_id=plan.pk, actor=request.user, revision=revision, key=key, direction=direction)
    )


@require_POST
def plan_decide(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id, need="approve")
    form = DecisionForm(request.POST)
    if not form.is_valid():
        return (
            plan_page.conflict(request, plan, "Choose approve, reject or request changes.", status=422)
            if request.htmx
            else redirect("plan_detail", plan_id=plan.pk)
        )
    data = form.cleaned_data
    # Only a decision that would be accepted is asked twice; anything else is refused below as usual.
    ready = data["revision"] == plan.revision and review.approval_blocker(plan=plan, user=request.user) is None
    if data["decision"] == "approved" and ready and not request.POST.get("confirm_high"):
        high = [step for step in plan.steps.all() if step.risk == Risk.HIGH]
        if high:
            return _confirm_high_steps(request, plan, high, data)
    try:
        approval = review.plan_decision_record(
            plan_id=plan.pk,
            actor=request.user,
            revision=data["revision"],
            content_hash=data["content_hash"],
            decision=data["decision"],
            comment=data["comment"],
        )
    except ServiceError as error:
        return plan_page.refused(request, plan, error.message, error.status)
    text = DECISION_TEXT[approval.decision].format(revision=approval.revision)
    if not request.htmx:
        messages.success(request, text)
        return redirect("plan_detail", plan_id=plan.pk)
    plan.refresh_from_db()
    return plan_page.render_plan_body(request, plan, flash=text)


def _confirm_high_steps(request: HtmxHttpRequest, plan: Plan, high: list, data: dict) -> HttpResponse:
    """Approving HIGH steps is asked twice, naming them; the second ask is a server round trip so it
    works with or without JavaScript. It carries the revision the approver saw, not the current one."""
    seen = DecisionForm(initial={"revision": data["revision"], "content_hash": data["content_hash"]})
    extra = {"confirm_high": high, "decision_form": seen, "comment": data["comment"]}
    if request.htmx:
        return plan_page.render_plan_body(request, plan, **extra)
    return render(request, "planning/plan_detail.html", plan_page.plan_context(request, plan, **extra))


@require_POST
def plan_resubmit(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id, need="edit")
    return plan_page.perform_action(
        request, plan, lambda: review.plan_resubmit(plan_id=plan.pk, actor=request.user), done="Sent back for approval."
    )


@require_POST
def code_refresh(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id, need="edit")
    return plan_page.perform_action(
        request, plan, lambda: dry_runs.dry_run_refresh(plan_id=plan.pk, actor=request.user), done="A fresh dry run is under way."
    )


@require_GET
def plan_revisions(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id)
    revisions = list(plan.revisions.select_related("author"))
    numbers = [r.number for r in revisions]
    compare = selectors.revision_pair(plan, revisions, request.GET.get("a"), request.GET.get("b"), request.GET.get("view"))
    return render(request, "planning/revisions.html", {"plan": plan, "revisions": revisions, "numbers": numbers, **compare})


@require_POST
def plan_retry(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id, need="edit")
    form = RetryForm(request.POST)
    choice = form.cleaned_data["planner"] or None if form.is_valid() else None
    try:
        services.plan_retry(plan=plan, actor=request.user, planner_choice=choice)
    except ServiceError as error:
        messages.error(request, error.message)
    return redirect("plan_detail", plan_id=plan.pk)


@require_POST
def plan_retry_goal(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id, need="edit")
    try:
        services.plan_retry_with_goal(plan=plan, actor=request.user, text=request.POST.get("text", ""))
    except ServiceError as error:
        messages.error(request, error.message)
    return redirect("plan_detail", plan_id=plan.pk)


@require_POST
def plan_start_empty(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id, need="edit")
    try:
        services.plan_start_empty(plan=plan, actor=request.user)
    except ServiceError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, "Started from an empty plan: add its steps below.")
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
    except ServiceError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Saved as playbook “{playbook.name}”.")
    return redirect("plan_detail", plan_id=plan.pk)


@require_GET
def playbook_list(request: HtmxHttpRequest) -> HttpResponse:
    if not user_can(request.user, "view"):
        raise PermissionDenied("You may not view playbooks.")
    return render(request, "planning/playbooks.html", {"playbooks": selectors.playbooks()})


@require_POST
def alternatives_request(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id, need="edit")
    try:
        drafting = services.alternatives_request(plan_id=plan.pk, actor=request.user, count=_int_from(request.POST, "count"))
    except ServiceError as error:
        return plan_page.refused(request, plan, error.message, error.status)
    return redirect("plan_detail", plan_id=drafting.pk)


@require_POST
def alternative_choose(request: HtmxHttpRequest, goal_id: int) -> HttpResponse:
    goal = get_goal_for_user(request.user, goal_id, need="edit")
    plan_id = _int_from(request.POST, "plan_id")
    try:
        chosen = services.alternative_choose(goal_id=goal.pk, plan_id=plan_id, actor=request.user)
    except ServiceError as error:
        shown = goal.plans.filter(pk=plan_id).first() or goal.plans.order_by("id").first()
        return plan_page.refused(request, shown, error.message, error.status)
    messages.success(request, f"Plan {chosen.pk} is now the plan; the other drafts are kept as superseded alternatives.")
    return redirect("plan_detail", plan_id=chosen.pk)


def _int_from(data, name: str) -> int:
    """A number from a form; anything else is -1, which the services refuse as not found or out of range."""
    try:
        return int(data.get(name, ""))
    except ValueError:
        return -1
