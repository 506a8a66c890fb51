import json
import keyword
import re

from django import template
from django.conf import settings
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import mark_safe

register = template.Library()


@register.filter
def pretty_json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


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
