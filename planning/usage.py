"""What a plan spends on the LLM, and its budget.

Whoever makes LLM calls for a plan opens `llm.metered(PlanMeter(plan_id))` around them: planning, code
drafting, replans and answers here and in execution, and the worker around a step's tool (a tool such
as llm_generate does not know its plan). The meter records each answered call as an LlmCall row and,
before each call, refuses it once the plan has spent its budget.
"""

import logging
from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings

from approvals import audit
from core import llm
from planning.models import LlmCall, Plan

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Budget:
    usd: Decimal | None
    tokens: int | None


def budget_of(plan: Plan) -> Budget:
    """The plan's own budget where it has one, else the server's (either may be no limit)."""
    usd = plan.budget_usd if plan.budget_usd is not None else settings.COUNTERSIGN_PLAN_BUDGET_USD
    tokens = plan.budget_tokens if plan.budget_tokens is not None else settings.COUNTERSIGN_PLAN_BUDGET_TOKENS
    return Budget(usd=None if usd is None else Decimal(str(usd)), tokens=tokens)


def overspend(plan: Plan) -> str | None:
    """Why no further LLM call may be made for the plan, or None while it is within its budget."""
    budget = budget_of(plan)
    if budget.usd is None and budget.tokens is None:
        return None
    usage = plan.llm_usage()
    calls = f"{usage['calls']} call{'' if usage['calls'] == 1 else 's'}"
    if budget.usd is not None and Decimal(str(usage["cost_usd"])) >= budget.usd:
        return f"budget of {_money(budget.usd)} spent: {_money(usage['cost_usd'])} used in {calls}"
    tokens = usage["tokens_in"] + usage["tokens_out"]
    if budget.tokens is not None and tokens >= budget.tokens:
        return f"budget of {budget.tokens:,} tokens spent: {tokens:,} used in {calls}"
    return None


def _money(amount) -> str:
    """Dollars and cents, or as many decimals as a fraction of a cent needs."""
    amount = Decimal(str(amount))
    if amount == 0 or amount >= Decimal("0.01"):
        return f"${amount:.2f}"
    return "$" + f"{amount:.6f}".rstrip("0")


class PlanMeter:
    def __init__(self, plan_id: int, *, step_key: str = ""):
        self.plan_id, self.step_key = plan_id, step_key

    def check(self) -> None:
        plan = Plan.objects.get(pk=self.plan_id)
        reason = overspend(plan)
        if reason is None:
            return
        message = f"LLM {reason}. An approver can raise the plan's budget; then retry."
        audit.record(action="plan.llm_budget_spent", plan_id=self.plan_id, step_key=self.step_key, data={"reason": reason})
        log.info("Plan %s: %s", self.plan_id, reason)
        raise llm.BudgetSpent(message)

    def record(self, completion: llm.Completion, purpose: str) -> None:
        LlmCall.objects.create(
            plan_id=self.plan_id,
            step_key=self.step_key,
            purpose=purpose[:20],
            model=completion.model[:100],
            tokens_in=completion.tokens_in,
            tokens_out=completion.tokens_out,
            latency_ms=completion.latency_ms,
            cost_usd=Decimal(str(round(completion.cost_usd, 6))),
            output_mode=completion.output_mode,
        )


def metered(plan_id: int, *, step_key: str = ""):
    """`with usage.metered(plan.pk):` — every LLM call inside counts against the plan."""
    return llm.metered(PlanMeter(plan_id, step_key=step_key))
