"""Measures of how planning and execution are doing over a period (the seed documents' list: plan
quality, execution success, time to completion, step failure rate, replanning, resource use, human edits)."""

import math
from collections import Counter
from dataclasses import dataclass

from django.db.models import Count, Min, Sum

from approvals.models import Approval, AuditEvent
from core import llm
from planning.diff import diff_contents
from planning.models import FINISHED_STATUSES, LlmCall, Plan, PlanRevision, Step


def percentile(values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile: the smallest value with at least `fraction` of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


@dataclass
class Summary:
    plans: int
    by_status: dict
    success_rate: float | None
    step_failure_rate: float | None
    replan_rate: float | None
    replans: int
    approval_median_s: float | None
    approval_p90_s: float | None
    completion_median_s: float | None
    completion_p90_s: float | None
    edit_rate: float | None
    edited_plans: int
    approved_plans: int
    mean_changes_when_edited: float | None
    gates_approved: int
    gates_denied: int
    gate_approval_rate: float | None
    llm_calls: int
    tokens_in: int
    tokens_out: int
    tokens_per_plan: float | None
    cost_usd: float
    cost_per_plan_usd: float | None
    gates_expired: int = 0


def llm_totals(plans: list[Plan]) -> tuple[int, int, int, float]:
    """(calls, tokens in, tokens out, cost) of every LLM call made for these plans. A plan from before
    calls were recorded one by one counts with the planning usage stored on it."""
    recorded = {
        row["plan_id"]: row
        for row in LlmCall.objects.filter(plan_id__in=[p.pk for p in plans])
        .values("plan_id")
        .annotate(calls=Count("id"), tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"), cost=Sum("cost_usd"))
    }
    calls = tokens_in = tokens_out = 0
    cost = 0.0
    for plan in plans:
        row = recorded.get(plan.pk)
        if row:
            calls, tokens_in, tokens_out = calls + row["calls"], tokens_in + row["tokens_in"], tokens_out + row["tokens_out"]
            cost += float(row["cost"])
        else:
            tokens_in, tokens_out = tokens_in + plan.tokens_in, tokens_out + plan.tokens_out
            cost += llm.cost_usd(plan.model, plan.tokens_in, plan.tokens_out)
    return calls, tokens_in, tokens_out, cost


def summary(*, since=None, until=None) -> Summary:
    plans = Plan.objects.all()
    if since:
        plans = plans.filter(created_at__gte=since)
    if until:
        plans = plans.filter(created_at__lte=until)
    plans = list(plans.only("id", "status", "replan_count", "started_at", "finished_at", "tokens_in", "tokens_out", "model"))
    ids = [plan.pk for plan in plans]
    by_status = Counter(plan.status for plan in plans)
    finished = sum(by_status[status] for status in FINISHED_STATUSES)
    ran = [p for p in plans if p.started_at]

    step_statuses = Counter(Step.objects.filter(plan_id__in=ids).values_list("status", flat=True))
    executed = step_statuses[Step.Status.SUCCEEDED] + step_statuses[Step.Status.FAILED]

    approvals = Approval.objects.filter(plan_id__in=ids)
    first_approved = dict(
        approvals.filter(kind=Approval.Kind.PLAN, decision=Approval.Decision.APPROVED)
        .values("plan_id")
        .annotate(at=Min("created_at"))
        .values_list("plan_id", "at")
    )
    revisions = list(
        PlanRevision.objects.filter(plan_id__in=ids)
        .order_by("plan_id", "number")
        .values("plan_id", "number", "created_at", "planner", "content")
    )
    by_plan: dict[int, list[dict]] = {}
    for revision in revisions:
        by_plan.setdefault(revision["plan_id"], []).append(revision)

    waits, edited, changes = [], 0, []
    for plan_id, approved_at in first_approved.items():
        history = by_plan.get(plan_id, [])
        if not history:
            continue
        waits.append((approved_at - history[0]["created_at"]).total_seconds())
        before_approval = [r for r in history if r["created_at"] <= approved_at]
        human = [r for r in before_approval if r["planner"] == Plan.Planner.HUMAN]
        if human:
            edited += 1
            changes.append(len(diff_contents(history[0]["content"], before_approval[-1]["content"])))
    completions = [
        (p.finished_at - p.started_at).total_seconds() for p in plans if p.finished_at and p.started_at and p.status in FINISHED_STATUSES
    ]

    gates = Counter(approvals.filter(kind=Approval.Kind.GATE).values_list("decision", flat=True))
    calls, tokens_in, tokens_out, cost = llm_totals(plans)
    return Summary(
        plans=len(plans),
        by_status={status.label: by_status[status.value] for status in Plan.Status if by_status[status.value]},
        success_rate=ratio(by_status[Plan.Status.SUCCEEDED], finished),
        step_failure_rate=ratio(step_statuses[Step.Status.FAILED], executed),
        replan_rate=ratio(sum(1 for p in ran if p.replan_count), len(ran)),
        replans=sum(p.replan_count for p in plans),
        approval_median_s=percentile(waits, 0.5),
        approval_p90_s=percentile(waits, 0.9),
        completion_median_s=percentile(completions, 0.5),
        completion_p90_s=percentile(completions, 0.9),
        edit_rate=ratio(edited, len(first_approved)),
        edited_plans=edited,
        approved_plans=len(first_approved),
        mean_changes_when_edited=sum(changes) / len(changes) if changes else None,
        gates_approved=gates[Approval.Decision.APPROVED],
        gates_denied=gates[Approval.Decision.REJECTED],
        gate_approval_rate=ratio(gates[Approval.Decision.APPROVED], gates[Approval.Decision.APPROVED] + gates[Approval.Decision.REJECTED]),
        llm_calls=calls,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        tokens_per_plan=(tokens_in + tokens_out) / len(plans) if plans else None,
        cost_usd=round(cost, 6),
        cost_per_plan_usd=round(cost / len(plans), 6) if plans else None,
        gates_expired=AuditEvent.objects.filter(action="gate.expired", plan_id__in=ids).count(),
    )
