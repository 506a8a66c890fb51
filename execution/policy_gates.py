"""Whether a ready step waits at a runtime gate: HIGH always, and any step a policy gates, judged on its
resolved arguments."""

from planning.approval_rules import plan_verdicts_for_call
from planning.models import Plan, Step


def gate_required(plan: Plan, step: Step) -> bool:
    return plan_verdicts_for_call(plan, step).gate_required
