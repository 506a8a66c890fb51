import json

from django import template

register = template.Library()


@register.filter
def pretty_json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


@register.filter
def get_issues(issues: dict, key: str) -> list:
    return issues.get(key, [])


@register.filter
def duration(step) -> str:
    if not (step.started_at and step.finished_at):
        return ""
    seconds = (step.finished_at - step.started_at).total_seconds()
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"
