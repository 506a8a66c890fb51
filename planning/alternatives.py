"""Alternatives: several drafts for one goal, scored so an operator can compare them side by side and
choose one (the seeds' LATS: candidate plans evaluated before one is followed). The writes live in
planning/services.py; this module scores a draft and reads a goal's alternatives."""

from dataclasses import dataclass

from core.risk import Risk
from planning import estimates
from planning.models import Goal, Plan
from tools.registry import registry

# Points a draft loses: a reviewer's attention is the scarce thing, so what needs it costs most.
FINDING_COST = {"high": 20, "medium": 8, "low": 3}
RISK_COST = {Risk.HIGH: 10, Risk.MEDIUM: 4, Risk.LOW: 0}
STEP_COST = 2
UNKNOWN_DURATION_COST = 1


def score_of(plan: Plan, steps) -> tuple[float, str]:
    """A score out of 100 and the reason for it, from what the page shows: risks, preflight findings,
    estimates and size. Deterministic, so the same draft always scores the same."""
    steps = list(steps)
    risks = [registry.risk_of(step.tool) for step in steps]
    findings = plan.preflight or []
    estimate = estimates.plan_estimates(plan, steps)
    score = 100.0 - STEP_COST * max(0, len(steps) - 1)
    score -= sum(RISK_COST.get(risk, 10) for risk in risks)
    score -= sum(FINDING_COST.get(finding["severity"], 3) for finding in findings)
    score -= UNKNOWN_DURATION_COST * len(estimate.unknown_tools)
    high = sum(1 for risk in risks if risk == Risk.HIGH)
    parts = [f"{len(steps)} step{'s' if len(steps) != 1 else ''}", f"{high} high-risk" if high else "no high-risk step"]
    parts.append(f"{len(findings)} preflight finding{'s' if len(findings) != 1 else ''}" if findings else "no preflight findings")
    if estimate.p50_s is not None:
        parts.append(f"about {estimate.p50_s:.1f} s")
    return round(max(score, 0.0), 1), ", ".join(parts)


@dataclass(frozen=True)
class Alternative:
    plan: Plan
    steps: list
    estimates: estimates.Estimates

    @property
    def is_open(self) -> bool:
        return self.plan.status == Plan.Status.ALTERNATIVE


def goal_alternatives(goal: Goal) -> list[Plan]:
    """Every draft that was one of the goal's alternatives, best score first, then oldest."""
    plans = goal.plans.filter(alternative_score__isnull=False).order_by("-alternative_score", "id")
    return list(plans)


def side_by_side(goal: Goal) -> list[Alternative]:
    """The alternatives with their steps and estimates, for the plan page's comparison."""
    plans = goal.plans.filter(alternative_score__isnull=False).prefetch_related("steps").order_by("-alternative_score", "id")
    return [
        Alternative(plan=plan, steps=list(plan.steps.all()), estimates=estimates.plan_estimates(plan, plan.steps.all())) for plan in plans
    ]
