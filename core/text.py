"""Text people and planners type. Control characters have no business in a goal, a step or a comment:
PostgreSQL cannot store NUL in text or jsonb at all, and the others hide from the reviewer what a
countersigned text really says. Tab, line feed and carriage return stay allowed: browsers send the line
breaks of a textarea as CR LF."""

import re
from typing import Any

from core.errors import ServiceError

# C0 controls but tab, LF and CR; DEL; C1 controls; and lone surrogates (JSON "\ud800" parses to one, and
# it cannot be encoded as UTF-8 for the database).
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def control_character_problem(text: str) -> str | None:
    """Why `text` is refused, or None when it is fine."""
    found = _FORBIDDEN.search(text)
    if found is None:
        return None
    return (
        f"contains the control character U+{ord(found.group()):04X} at position {found.start() + 1}; only tab and line breaks are allowed"
    )


def json_control_character_problems(value: Any, path: str = "") -> list[tuple[str, str]]:
    """(path, problem) for every string, key included, nested anywhere in a JSON value."""
    if isinstance(value, str):
        problem = control_character_problem(value)
        return [(path, problem)] if problem else []
    problems = []
    if isinstance(value, dict):
        for key, child in value.items():
            key_problem = control_character_problem(key) if isinstance(key, str) else None
            name = repr(key) if key_problem else str(key)
            child_path = f"{path}.{name}" if path else name
            if key_problem:
                problems.append((child_path, f"the key {key_problem}"))
            problems.extend(json_control_character_problems(child, child_path))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            problems.extend(json_control_character_problems(child, f"{path}.{index}" if path else str(index)))
    return problems


def refuse_control_characters(text: str | None, *, field: str) -> None:
    """Raise a 422 ServiceError naming `field` when `text` holds a forbidden control character."""
    problem = control_character_problem(text or "")
    if problem:
        raise ServiceError(f"The {field} {problem}.", status=422)
