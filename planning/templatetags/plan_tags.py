import json
import keyword
import re

from django import template
from django.conf import settings
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import mark_safe

from planning import provenance as provenance_of
from tools import labels

register = template.Library()


@register.filter
def pretty_json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


# Audit actions whose generic sentence ("Gate opened", "Step s1 succeeded") would read oddly.
EVENT_SENTENCES = {
    "goal.submitted": "Goal submitted",
    "plan.proposed": "The planner proposed the plan",
    "plan.replan_proposed": "The planner proposed a replan",
    "plan.alternatives_proposed": "The planner proposed alternative plans",
    "plan.alternative_chosen": "This alternative was chosen as the plan",
    "plan.superseded": "Another alternative was chosen; this plan is superseded",
    "plan.decompose_requested": "Decomposing {key} was asked for",
    "plan.decomposed": "Step {key} was decomposed into a sub-plan",
    "plan.decompose_failed": "Decomposing {key} failed",
    "plan.run_started": "Run started",
    "plan.llm_budget_spent": "The plan's LLM budget is spent",
    "plan.aftermath_requeued": "The answer or replan was queued again",
    "gate.opened": "{key} waits at its runtime gate",
    "gate.approved": "{key} approved at its gate",
    "gate.denied": "{key} denied at its gate",
    "gate.approved_by_grant": "{key} approved by a standing grant",
    "gate.expired": "{key}'s gate expired",
    "gate.escalated": "{key}'s gate passed its deadline and was escalated",
    "step.retry_requested": "A retry of {key} was requested",
    "step.skip_requested": "Skipping {key} was requested",
    "code.dry_run": "The dry run finished",
    "code.dry_run_requested": "A dry run was requested",
}


@register.filter
def event_sentence(event) -> str:
    """An audit event as the activity log says it: "Step s1 succeeded", not "step.succeeded s1"."""
    template = EVENT_SENTENCES.get(event.action)
    key = event.step_key or ""
    if template:
        sentence = template.format(key=key or "the step")
    else:
        noun, _, verb = event.action.partition(".")
        sentence = " ".join(part for part in (noun.capitalize(), key, verb.replace("_", " ")) if part)
    return sentence[:1].upper() + sentence[1:]


@register.filter(name="untrusted_arguments")
def untrusted_arguments_filter(provenance) -> list[str]:
    return provenance_of.untrusted_arguments(provenance)


@register.filter
def seconds(value: float) -> str:
    """A duration for people: 0.4 s, 12 s, 3 min 5 s, 2 h 10 min."""
    if value < 10:
        return f"{value:.1f} s"
    if value < 60:
        return f"{value:.0f} s"
    if value < 3600:
        return f"{int(value // 60)} min {int(value % 60)} s"
    return f"{int(value // 3600)} h {int(value % 3600 // 60)} min"


@register.filter
def untrusted_edges(edges) -> list:
    return [edge for edge in edges if edge.untrusted]


@register.filter
def high_findings(findings) -> list[dict]:
    return [finding for finding in findings or () if finding.get("severity") == "high"]


@register.filter
def findings_of(findings, key: str) -> list[dict]:
    return [finding for finding in findings or () if finding.get("step") == key]


@register.filter
def argument_labels(step) -> list[tuple[str, object, str]]:
    """(argument, raw value, label) for the resolved arguments of a waiting step that have a display label."""
    found = labels.argument_labels(step.tool, step.resolved_args)
    return [(name, step.resolved_args[name], label) for name, label in found.items()]


@register.filter
def get_issues(issues: dict, key: str) -> list:
    return issues.get(key, [])


@register.filter
def changes_of(proposal_changes: list, key: str):
    """One step's entry in the changes since the planner's proposal, or None."""
    return next((entry for entry in proposal_changes or () if entry.step == key), None)


@register.filter
def planning_is_slow(plan) -> bool:
    """The plan has been drafting for longer than drafting usually takes."""
    return (timezone.now() - plan.updated_at).total_seconds() > settings.COUNTERSIGN_PLANNING_SLOW_S


@register.filter
def duration(step) -> str:
    if not (step.started_at and step.finished_at):
        return ""
    seconds = (step.finished_at - step.started_at).total_seconds()
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


TOKEN = __import__("re").compile(
    r"(?P<comment>#.*)|(?P<string>[rbfu]{0,2}(?:'''|\"\"\"|'[^'\n]*'?|\"[^\"\n]*\"?))|(?P<number>\b\d[\d_.]*\b)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<other>.)",
    re.DOTALL,
)


@register.filter
def python_lines(code: str) -> list:
    """Code as numbered lines with keywords, strings, comments and numbers marked; everything escaped."""
    lines = []
    for number, line in enumerate((code or "").splitlines(), start=1):
        parts = []
        for match in TOKEN.finditer(line):
            kind, text = match.lastgroup, escape(match.group())
            if kind == "name" and keyword.iskeyword(match.group()):
                parts.append(f'<span class="kw">{text}</span>')
            elif kind in {"comment", "string", "number"}:
                parts.append(f'<span class="{kind[:3]}">{text}</span>')
            else:
                parts.append(text)
        lines.append((number, mark_safe("".join(parts))))  # noqa: S308 (every token above is escaped)
    return lines


CITATION_RE = re.compile(r"\[(s\d+)\]")


@register.filter
def cite_links(text: str) -> str:
    """An answer, escaped, with its step citations ([s3]) linked to their steps on the page."""
    escaped = escape(text or "").replace("\n", "<br>")
    return mark_safe(CITATION_RE.sub(r'<a href="#step-\1" class="cite">[\1]</a>', escaped))  # noqa: S308 (escaped above)
