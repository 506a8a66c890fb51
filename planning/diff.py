"""Readable differences between two plan revisions: which step, which field (for arguments, which key),
old → new; an added step is shown in full."""

import dataclasses
import json
from dataclasses import dataclass

from planning.models import STEP_CONTENT_FIELDS

# Fields a reader compares; the tool's definition hash follows the tool and is noise beside it.
SHOWN_FIELDS = tuple(name for name in STEP_CONTENT_FIELDS if name not in {"key", "tool_hash"})


@dataclass(frozen=True)
class Change:
    kind: str  # added | removed | changed | moved
    step: str
    field: str = ""
    old: str = ""
    new: str = ""
    # An added step's fields, in full: (field, value) pairs.
    details: tuple = ()


def _show(value) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _field_changes(key: str, before: dict, after: dict) -> list[Change]:
    changes = []
    for name in SHOWN_FIELDS:
        old, new = before.get(name, ""), after.get(name, "")
        if old == new:
            continue
        if name == "args" and isinstance(old, dict) and isinstance(new, dict):
            for arg in sorted(set(old) | set(new)):
                if old.get(arg) != new.get(arg):
                    changes.append(Change("changed", key, f"args.{arg}", _show(old.get(arg, "")), _show(new.get(arg, ""))))
        else:
            changes.append(Change("changed", key, name, _show(old), _show(new)))
    return changes


def _in_full(step: dict) -> tuple:
    return tuple((name, _show(step[name])) for name in SHOWN_FIELDS if step.get(name) not in (None, "", [], {}))


def diff_contents(old: list[dict], new: list[dict]) -> list[Change]:
    old_by_key = {step["key"]: step for step in old}
    new_by_key = {step["key"]: step for step in new}
    changes: list[Change] = []
    for step in new:
        before = old_by_key.get(step["key"])
        if before is None:
            changes.append(Change("added", step["key"], new=f"{step['title']} ({step['tool']})", details=_in_full(step)))
        else:
            changes.extend(_field_changes(step["key"], before, step))
    for step in old:
        if step["key"] not in new_by_key:
            changes.append(Change("removed", step["key"], old=f"{step['title']} ({step['tool']})"))
    kept_old = [step["key"] for step in old if step["key"] in new_by_key]
    kept_new = [step["key"] for step in new if step["key"] in old_by_key]
    if kept_old != kept_new:
        changes.append(Change("moved", "", "order", " → ".join(kept_old), " → ".join(kept_new)))
    return changes


@dataclass
class StepChanges:
    """What happened to one step since the planner's proposal, and who did it."""

    step: str
    kind: str  # added | removed | changed
    changes: list = dataclasses.field(default_factory=list)
    editors: list = dataclasses.field(default_factory=list)


def changes_since_proposal(revisions: list) -> list[StepChanges]:
    """Per step, the changes from the planner's latest proposal to the latest revision, with the names of
    the people whose revisions touched it. `revisions` are PlanRevision rows in order, authors loaded."""
    proposals = [index for index, revision in enumerate(revisions) if revision.author_id is None]
    if not proposals or proposals[-1] == len(revisions) - 1:
        return []
    start = proposals[-1]
    editors: dict[str, list] = {}
    for before, after in zip(revisions[start:], revisions[start + 1 :], strict=False):
        name = after.author.get_username() if after.author_id else after.get_planner_display()
        for change in diff_contents(before.content, after.content):
            names = editors.setdefault(change.step, [])
            if name not in names:
                names.append(name)
    by_step: dict[str, StepChanges] = {}
    for change in diff_contents(revisions[start].content, revisions[-1].content):
        kind = change.kind if change.kind in {"added", "removed"} else "changed"
        entry = by_step.setdefault(change.step, StepChanges(step=change.step or "order", kind=kind, editors=editors.get(change.step, [])))
        entry.changes.append(change)
    return list(by_step.values())
