"""Readable differences between two plan revisions: which step, which field, old → new."""

import json
from dataclasses import dataclass

from planning.models import STEP_CONTENT_FIELDS


@dataclass(frozen=True)
class Change:
    kind: str  # added | removed | changed | moved
    step: str
    field: str = ""
    old: str = ""
    new: str = ""


def _show(value) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def diff_contents(old: list[dict], new: list[dict]) -> list[Change]:
    old_by_key = {step["key"]: step for step in old}
    new_by_key = {step["key"]: step for step in new}
    changes: list[Change] = []
    for step in new:
        before = old_by_key.get(step["key"])
        if before is None:
            changes.append(Change("added", step["key"], new=f"{step['title']} ({step['tool']})"))
            continue
        for field in STEP_CONTENT_FIELDS:
            if field != "key" and before.get(field) != step.get(field):
                changes.append(Change("changed", step["key"], field, _show(before.get(field, "")), _show(step.get(field, ""))))
    for step in old:
        if step["key"] not in new_by_key:
            changes.append(Change("removed", step["key"], old=f"{step['title']} ({step['tool']})"))
    kept_old = [step["key"] for step in old if step["key"] in new_by_key]
    kept_new = [step["key"] for step in new if step["key"] in old_by_key]
    if kept_old != kept_new:
        changes.append(Change("moved", "", "order", " → ".join(kept_old), " → ".join(kept_new)))
    return changes
