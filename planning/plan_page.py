"""The plan page, shared by the planning views (review, edits) and the execution views (run, gates):
its context, the partial re-render after an action, and how a refused action is shown."""

import json

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django_htmx.http import reswap, retarget
from django_htmx.middleware import HtmxDetails

from core import llm
from core.errors import ServiceError
from core.roles import user_can
from planning import alternatives, approval_rules, dry_runs, estimates, ledger, planner, review, selectors, services
from planning.forms import CodeStepForm, DecisionForm, PlaybookForm, RetryForm, StepForm
from planning.fragments import progress_of, step_controls
from planning.graph import plan_graph
from planning.models import Plan
from planning.permissions import may_edit_steps
from tools.registry import registry


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


STEP_ROUTES = ("step_edit", "step_move", "step_delete", "step_decompose")


def attach_step_urls(plan: Plan, steps) -> None:
    """Each card's action URLs, reversed once per page rather than four times per step (a 500-step
    plan spent a fifth of its render in reverse())."""
    patterns = {name: reverse(name, args=[plan.pk, "__step__"]) for name in STEP_ROUTES}
    for step in steps:
        step.urls = {name: url.replace("__step__", step.key) for name, url in patterns.items()}


def plan_context(request, plan: Plan, **extra) -> dict:
    plan, steps = selectors.plan_with_steps(plan)
    attach_step_urls(plan, steps)
    approvals = selectors.plan_approvals(plan)
    authors = selectors.revision_author_ids(plan)
    can_edit = plan.is_editable and may_edit_steps(request.user, plan) is None
    is_code = dry_runs.is_code_plan(plan)
    dry_run = dry_runs.current_dry_run(plan) if is_code else None
    context = {
        "plan": plan,
        "steps": steps,
        "issues": selectors.stored_plan_issues(steps),
        "graph": plan_graph(steps),
        "approvals": approvals,
        "current_approvals": [a for a in approvals if a.voided_at is None],
        "voided_approvals": [a for a in approvals if a.voided_at is not None and a.kind == "plan"],
        "can_edit": can_edit,
        "decision_blocker": review.approval_blocker(plan=plan, user=request.user, authors=authors),
        "decision_form": DecisionForm(initial={"revision": plan.revision, "content_hash": dry_runs.approval_hash(plan, dry_run)}),
        "is_code_plan": is_code,
        "dry_run": dry_run,
        "approval_hash": dry_runs.approval_hash(plan, dry_run),
        "code_blocker": dry_runs.dry_run_blocker(plan, dry_run),
        "can_refresh_dry_run": is_code
        and user_can(request.user, "edit")
        and plan.status in {Plan.Status.AWAITING_APPROVAL, Plan.Status.APPROVED},
        "retry_form": RetryForm(),
        "playbook_form": PlaybookForm(initial={"name": plan.goal.text[:200]}),
        "can_save_playbook": user_can(request.user, "approve") and plan.status in services.SAVEABLE_STATUSES,
        "show_decision": user_can(request.user, "approve"),
        "progress": progress_of(steps),
        "events": selectors.plan_events(plan),
        "proposal_changes": selectors.proposal_changes(plan),
        "estimates": None
        if is_code or plan.status not in {Plan.Status.AWAITING_APPROVAL, Plan.Status.APPROVED}
        else estimates.plan_estimates(plan, steps),
        "changes_request": review.changes_request(plan),
        "facts": ledger.ledger_of(plan.pk),
        **_alternatives_context(request.user, plan, is_code),
        **step_controls(plan, request.user, authors),
        **approval_rules.page_context(plan, steps, request.user, dry_runs.approval_hash(plan, dry_run)),
    }
    # The add-step form lists every step as a possible dependency, which costs more to render than a
    # step card on a long plan; it is fetched when the operator opens it, except on an empty plan.
    if can_edit and not steps:
        context["add_form"] = step_form(plan, steps, key=None)
    context.update(extra)
    return context


def _alternatives_context(user, plan: Plan, is_code: bool) -> dict:
    side_by_side = alternatives.side_by_side(plan.goal) if plan.alternative_score is not None or plan.goal.plans.count() > 1 else []
    return {
        "alternatives": side_by_side,
        "alternatives_open": any(alternative.is_open for alternative in side_by_side),
        "can_choose": user_can(user, "edit"),
        "can_draft_alternatives": not is_code and user_can(user, "edit") and plan.status in services.CHOOSABLE_AWAY,
        "alternative_counts": range(2, planner.MAX_ALTERNATIVES + 1),
        "can_decompose": not is_code and llm.is_configured(),
    }


def step_form(plan: Plan, steps, *, key: str | None, data=None) -> StepForm:
    others = [s.key for s in steps if s.key != key]
    step = next((s for s in steps if s.key == key), None)
    if step is not None and step.tool == "python_sandbox":
        initial = {"revision": plan.revision, "code": step.args.get("code", ""), "tables": ", ".join(step.args.get("tables", []))}
        initial["user_request"] = step.args.get("user_request", "")
        return CodeStepForm(data, initial=initial, prefix=f"step-{key}")
    initial = {"revision": plan.revision, "args": "{}"}
    if key is not None:
        step = next(s for s in steps if s.key == key)
        initial.update(
            {
                "title": step.title,
                "description": step.description,
                "tool": step.tool,
                "args": json.dumps(step.args, indent=2, ensure_ascii=False),
                "depends_on": step.depends_on,
                "condition": step.condition,
                "success_criteria": step.success_criteria,
            }
        )
    return StepForm(data, initial=initial, tools=registry.all(), other_keys=others, prefix=f"step-{key or 'new'}")


def render_plan_body(request, plan: Plan, *, status: int = 200, **extra) -> HttpResponse:
    return render(request, "planning/plan_detail.html#plan-body", plan_context(request, plan, **extra), status=status)


def refused(request: HtmxHttpRequest, plan: Plan, message: str, status: int) -> HttpResponse:
    """A refused action: the plan's message area (htmx) or a flash message on the plan page."""
    if not request.htmx:
        messages.error(request, message)
        return redirect("plan_detail", plan_id=plan.pk)
    return conflict(request, plan, message, status=status)


def conflict(request, plan: Plan, message: str, status: int = 409) -> HttpResponse:
    response = render(request, "planning/_plan_message.html", {"message": message, "kind": "conflict", "plan": plan}, status=status)
    return retarget(reswap(response, "outerHTML"), "#plan-messages")


def perform_action(request: HtmxHttpRequest, plan: Plan, perform, *, done: str | None = None) -> HttpResponse:
    """Run a service for an action button. Errors come back as the plan message (htmx) or a flash
    message. With `done`, success re-renders the plan body; without it (gates, interrupted steps) the
    live channel redraws the step, so an htmx request gets an empty 204."""
    try:
        perform()
    except ServiceError as error:
        return refused(request, plan, error.message, error.status)
    if not request.htmx:
        if done:
            messages.success(request, done)
        return redirect("plan_detail", plan_id=plan.pk)
    if done is None:
        return HttpResponse(status=204)
    plan.refresh_from_db()
    return render_plan_body(request, plan, flash=done)
