"""Preflight: checks every new revision runs before anyone reviews it, so an approver reads findings, not
just steps. Each finding names its step (or the plan), a severity and a one-line fix. Approving a plan with
a high-severity finding needs a comment saying why (planning/review.py).

Deterministic and quick (one query for earlier runs' arguments), so they run inside the revision's
transaction: the findings shown are always those of the revision on screen.
"""

from collections import defaultdict
from dataclasses import asdict, dataclass

from django.conf import settings

from core.risk import Risk
from planning.expressions import ExpressionError, evaluate_condition
from planning.models import Step
from planning.provenance import CONDITION, REPLAN, direct_sources, plan_provenance, untrusted_arguments
from tools.registry import registry

HIGH, MEDIUM, LOW = "high", "medium", "low"
SEVERITY_ORDER = {HIGH: 0, MEDIUM: 1, LOW: 2}
# Arguments that name the thing a step changes: two parallel changes to the same one race.
RESOURCE_ARGUMENTS = ("item", "table", "ticket_id", "ticket", "key", "id", "path", "to", "customer_name", "queue")
RECIPIENT_ARGUMENTS = ("to", "recipient", "email", "cc", "bcc")
HISTORY_SAMPLES = 3


@dataclass(frozen=True)
class Finding:
    check: str
    severity: str
    step: str
    message: str
    fix: str


def findings_for(steps) -> list[dict]:
    """All findings for a plan's steps, most severe first."""
    steps = list(steps)
    risks = {step.key: registry.risk_of(step.tool) for step in steps}
    ancestors = _ancestors(steps)
    found = [
        *_untrusted_into_risky(steps, risks),
        *_high_without_verification(steps, risks, ancestors),
        *_high_without_success_criteria(steps, risks),
        *_parallel_changes_to_one_resource(steps, risks, ancestors),
        *_constant_conditions(steps),
        *_unusual_arguments(steps),
    ]
    found.sort(key=lambda finding: (SEVERITY_ORDER[finding.severity], finding.step, finding.check))
    return [asdict(finding) for finding in found]


def high_findings(findings) -> list[dict]:
    return [finding for finding in findings or () if finding["severity"] == HIGH]


def _ancestors(steps) -> dict[str, set[str]]:
    parents = {step.key: set(step.depends_on or ()) for step in steps}
    memo: dict[str, set[str]] = {}

    def of(key: str) -> set[str]:
        if key not in memo:
            memo[key] = set()  # the plan is a validated DAG; this only guards the recursion
            memo[key] = {p for parent in parents.get(key, ()) for p in (parent, *of(parent))}
        return memo[key]

    return {key: of(key) for key in parents}


def _untrusted_into_risky(steps, risks):
    provenance = plan_provenance(steps)
    for step in steps:
        if risks[step.key] not in {Risk.MEDIUM, Risk.HIGH}:
            continue
        tainted = untrusted_arguments(provenance[step.key])
        if not tainted:
            continue
        sources = sorted({_source_name(entry) for name in tainted for entry in provenance[step.key][name] if not entry["trusted"]})
        what = "its condition" if tainted == [CONDITION] else ", ".join(name for name in tainted if name != CONDITION)
        yield Finding(
            "untrusted_into_risky",
            HIGH if risks[step.key] == Risk.HIGH else MEDIUM,
            step.key,
            f"{what} comes from untrusted data: {', '.join(sources)}. It will stop at a runtime gate.",
            "Write the value into the plan as a literal, or check it at the gate before approving.",
        )


def _source_name(entry: dict) -> str:
    if entry["step"] == REPLAN:
        return f"the replan, which read untrusted facts from {entry['path']} and wrote this value"
    return f"{entry['step']} ({entry['tool']})"


def _high_without_verification(steps, risks, ancestors):
    for step in steps:
        if risks[step.key] == Risk.HIGH and not any(risks.get(key) == Risk.LOW for key in ancestors[step.key]):
            yield Finding(
                "high_without_verification",
                MEDIUM,
                step.key,
                "No read step before it checks its inputs (stock, balance, the record it changes).",
                f"Add a read step (e.g. get_item) and make {step.key} depend on it.",
            )


def _high_without_success_criteria(steps, risks):
    for step in steps:
        if risks[step.key] == Risk.HIGH and not (step.success_criteria or "").strip():
            yield Finding(
                "high_without_success_criteria",
                MEDIUM,
                step.key,
                "A HIGH step with no success criteria: nobody can tell whether it did what was meant.",
                "Say what success looks like, e.g. 'the order shows as paid'.",
            )


def _resource(step) -> tuple | None:
    args = step.args if isinstance(step.args, dict) else {}
    for name in RESOURCE_ARGUMENTS:
        value = args.get(name)
        if isinstance(value, str | int) and not isinstance(value, bool) and "{{" not in str(value):
            return (step.tool, name, str(value).strip().lower())
    return None


def _parallel_changes_to_one_resource(steps, risks, ancestors):
    changing = [step for step in steps if risks[step.key] != Risk.LOW and _resource(step) is not None]
    for index, first in enumerate(changing):
        for second in changing[index + 1 :]:
            ordered = first.key in ancestors[second.key] or second.key in ancestors[first.key]
            if not ordered and _resource(first) == _resource(second):
                _, name, value = _resource(first)
                yield Finding(
                    "parallel_same_resource",
                    HIGH,
                    second.key,
                    f"{first.key} and {second.key} both change {name} {value!r} and may run at the same time.",
                    f"Make {second.key} depend on {first.key} (or merge them).",
                )


def _constant_conditions(steps):
    for step in steps:
        if not step.condition or CONDITION in direct_sources(step):
            continue
        try:
            value = evaluate_condition(step.condition, {})
        except ExpressionError:
            continue  # validation reports conditions that do not parse
        yield Finding(
            "constant_condition",
            MEDIUM,
            step.key,
            f"Its condition reads no step output, so it is always {'true' if value else 'false'}.",
            "Compare an earlier step's output (steps.KEY.output...), or remove the condition.",
        )


def _numbers(args: dict) -> dict[str, float]:
    return {name: value for name, value in args.items() if isinstance(value, int | float) and not isinstance(value, bool)}


def _unusual_arguments(steps):
    tools = {step.tool for step in steps}
    history: dict[tuple[str, str], list[float]] = defaultdict(list)
    earlier = (
        Step.objects.filter(tool__in=tools, status=Step.Status.SUCCEEDED, resolved_args__isnull=False)
        .order_by("-finished_at")
        .values_list("tool", "resolved_args")[:2000]
    )
    for tool, args in earlier:
        for name, value in _numbers(args if isinstance(args, dict) else {}).items():
            history[(tool, name)].append(abs(value))
    factor = settings.COUNTERSIGN_PREFLIGHT_OUTLIER_FACTOR
    domains = {domain.lower().lstrip("@") for domain in settings.COUNTERSIGN_ORG_DOMAINS}
    for step in steps:
        args = step.args if isinstance(step.args, dict) else {}
        for name, value in _numbers(args).items():
            seen = history.get((step.tool, name), [])
            if len(seen) >= HISTORY_SAMPLES and abs(value) > factor * max(max(seen), 1):
                yield Finding(
                    "unusual_argument",
                    HIGH,
                    step.key,
                    f"{name} = {value} is more than {factor:g}× the largest in {len(seen)} earlier runs of {step.tool} ({max(seen):g}).",
                    "Check the number; if it is meant, say so in the approval comment.",
                )
        for name in RECIPIENT_ARGUMENTS:
            value = args.get(name)
            if domains and isinstance(value, str) and "@" in value and "{{" not in value:
                domain = value.rsplit("@", 1)[1].strip().lower()
                if domain not in domains:
                    yield Finding(
                        "recipient_outside_organisation",
                        HIGH,
                        step.key,
                        f"{name} {value} is outside the organisation's domains ({', '.join(sorted(domains))}).",
                        "Check the address; if it is meant, say so in the approval comment.",
                    )
