"""Run-time pages and actions: run, cancel, answer a gate, resolve an interrupted step; the metrics page.
Refusals and re-renders go through the plan page's helpers (planning.plan_page), like review actions."""

import json
from datetime import datetime, time, timedelta

from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.dateparse import parse_date
from django.views.decorators.http import require_GET, require_POST

from execution import engine, gates, metrics
from planning import plan_page
from planning.permissions import get_plan_for_user
from planning.plan_page import HtmxHttpRequest


@require_POST
def plan_run(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id, need="run")
    return plan_page.perform_action(request, plan, lambda: engine.plan_run(plan_id=plan.pk, actor=request.user), done="Run started.")


@require_POST
def plan_cancel(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id, need="run")
    return plan_page.perform_action(request, plan, lambda: engine.plan_cancel(plan_id=plan.pk, actor=request.user), done="Run cancelled.")


@require_POST
def gate_decide(request: HtmxHttpRequest, plan_id: int, key: str) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id, need="approve")
    choice = request.POST.get("approve")
    gate_hash = request.POST.get("gate_hash") or None
    comment = request.POST.get("comment", "")[:5000]
    args = None
    if choice == "edit":
        # "Edit and approve": the arguments as the approver corrected them, in the tool's JSON form.
        try:
            args = json.loads(request.POST.get("args", ""))
        except ValueError:
            return plan_page.refused(request, plan, "The edited arguments are not valid JSON.", 422)
    approve = choice in {"yes", "edit"}
    return plan_page.perform_action(
        request,
        plan,
        lambda: gates.gate_answer(
            plan_id=plan.pk, key=key, actor=request.user, approve=approve, comment=comment, gate_hash=gate_hash, args=args
        ),
    )


@require_POST
def step_resolve(request: HtmxHttpRequest, plan_id: int, key: str) -> HttpResponse:
    plan = get_plan_for_user(request.user, plan_id, need="run")
    retry = request.POST.get("action") == "retry"
    return plan_page.perform_action(
        request, plan, lambda: gates.interrupted_step_resolve(plan_id=plan.pk, key=key, actor=request.user, retry=retry)
    )


def _date(value: str | None):
    try:
        return parse_date(value or "")
    except ValueError:  # well formed but impossible, like 2026-13-01
        return None


def _period(request) -> tuple[datetime, datetime, str | None]:
    today = timezone.localdate()
    error = None
    since, until = _date(request.GET.get("since")), _date(request.GET.get("until"))
    if request.GET.get("since") and since is None or request.GET.get("until") and until is None:
        error = "Dates are YYYY-MM-DD, and must exist."
    since = since or today - timedelta(days=30)
    until = until or today
    if since > until:
        error, since = "The start of the period is after its end.", until
    start = timezone.make_aware(datetime.combine(since, time.min))
    end = timezone.make_aware(datetime.combine(until, time.max))
    return start, end, error


@require_GET
def metrics_page(request):
    if not request.user.has_perm("approvals.view_auditevent"):
        raise PermissionDenied("Only auditors and administrators can read the metrics.")
    start, end, error = _period(request)
    summary = metrics.summary(since=start, until=end)
    largest = max(summary.by_status.values(), default=0)
    bars = [
        {"label": label, "count": count, "width": int(300 * count / largest) if largest else 0, "y": 8 + i * 26}
        for i, (label, count) in enumerate(summary.by_status.items())
    ]
    context = {
        "summary": summary,
        "since": start.date(),
        "until": end.date(),
        "error": error,
        "bars": bars,
        "chart_height": 16 + 26 * len(bars),
    }
    return render(request, "execution/metrics.html", context, status=422 if error else 200)
