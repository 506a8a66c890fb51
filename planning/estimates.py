"""Estimates on the approval card: how long the run will take (from each tool's history, along the
critical path), what the LLM has cost and will cost, and the blast radius (what changes, who hears, the
largest amount). Read at render time from history; three queries whatever the plan's size."""

from dataclasses import dataclass
from statistics import median

from django.conf import settings
from django.db.models import Avg

from core.risk import Risk
from planning.models import LlmCall, Plan, Step
from planning.preflight import RECIPIENT_ARGUMENTS
from tools.amounts import estimated_amount
from tools.registry import registry

HISTORY_ROWS = 2000


@dataclass(frozen=True)
class Estimates:
    p50_s: float | None  # None: some step's tool has never run here
    p90_s: float | None
    unknown_tools: tuple[str, ...]
    llm_cost_usd: float
    answer_cost_usd: float | None
    changing_steps: int
    recipients: tuple[str, ...]
    external_recipients: tuple[str, ...]
    largest_amount: float | None

    def as_dict(self) -> dict:
        return {
            "duration_p50_s": self.p50_s,
            "duration_p90_s": self.p90_s,
            "unknown_tools": list(self.unknown_tools),
            "llm_cost_usd": self.llm_cost_usd,
            "answer_cost_usd": self.answer_cost_usd,
            "changing_steps": self.changing_steps,
            "recipients": list(self.recipients),
            "external_recipients": list(self.external_recipients),
            "largest_amount": self.largest_amount,
        }


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _critical_path(steps, seconds: dict[str, float]) -> float:
    finish: dict[str, float] = {}
    by_key = {step.key: step for step in steps}

    def done(key: str) -> float:
        if key not in finish:
            finish[key] = 0.0  # a validated plan is a DAG; this only guards the recursion
            finish[key] = max((done(dep) for dep in by_key[key].depends_on if dep in by_key), default=0.0) + seconds.get(key, 0.0)
        return finish[key]

    return max((done(step.key) for step in steps), default=0.0)


def plan_estimates(plan: Plan, steps) -> Estimates:
    steps = list(steps)
    tools = {step.tool for step in steps}
    history: dict[str, list[float]] = {}
    rows = (
        Step.objects.filter(tool__in=tools, status=Step.Status.SUCCEEDED, started_at__isnull=False, finished_at__isnull=False)
        .order_by("-finished_at")
        .values_list("tool", "started_at", "finished_at")[:HISTORY_ROWS]
    )
    for tool, started, finished in rows:
        history.setdefault(tool, []).append((finished - started).total_seconds())
    unknown = tuple(sorted(tool for tool in tools if tool not in history))
    p50 = p90 = None
    if not unknown:
        p50 = _critical_path(steps, {step.key: median(history[step.tool]) for step in steps})
        p90 = _critical_path(steps, {step.key: _percentile(history[step.tool], 0.9) for step in steps})

    usage = plan.llm_usage()
    answers = LlmCall.objects.filter(purpose="answer").aggregate(cost=Avg("cost_usd"))["cost"]

    domains = {domain.lower().lstrip("@") for domain in settings.COUNTERSIGN_ORG_DOMAINS}
    recipients, amounts = [], []
    for step in steps:
        args = step.args if isinstance(step.args, dict) else {}
        for name in RECIPIENT_ARGUMENTS:
            value = args.get(name)
            if isinstance(value, str) and "@" in value and "{{" not in value:
                recipients.append(value)
        amount = estimated_amount(step.tool, args)
        if amount is not None:
            amounts.append(amount)
    external = [r for r in recipients if domains and r.rsplit("@", 1)[1].lower() not in domains]
    return Estimates(
        p50_s=p50,
        p90_s=p90,
        unknown_tools=unknown,
        llm_cost_usd=usage["cost_usd"],
        answer_cost_usd=float(answers) if answers is not None else None,
        changing_steps=sum(1 for step in steps if registry.risk_of(step.tool) != Risk.LOW),
        recipients=tuple(dict.fromkeys(recipients)),
        external_recipients=tuple(dict.fromkeys(external)),
        largest_amount=max(amounts) if amounts else None,
    )
