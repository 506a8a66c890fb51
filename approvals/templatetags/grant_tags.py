import json

from django import template

register = template.Library()


@register.filter
def equality_predicate(args) -> str:
    """A grant predicate matching exactly these arguments, as JSON, to start a grant from a gate."""
    return json.dumps({name: {"equals": value} for name, value in (args or {}).items()})
