import json

from django import template

register = template.Library()


@register.filter
def pretty_json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


@register.filter
def get_issues(issues: dict, key: str) -> list:
    return issues.get(key, [])
