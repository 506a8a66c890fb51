"""Decompose a step (the seeds' hierarchical planning: a high-level step becomes a sub-plan). Splicing is
pure: the sub-steps take the step's place under fresh keys, the step's dependencies become the sub-plan's
inputs, and whatever read the step now reads the sub-plan's last steps."""

import re
from dataclasses import dataclass, field
from typing import Any


class NotASubPlan(ValueError):
    """The planner's answer is not a list of sub-steps; the message goes back to it for repair."""


@dataclass
class Splice:
    steps: list[dict]
    new_keys: list[str]
    last_keys: list[str]
    rewired: list[str] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)


def _number(key: str) -> int:
    return int(key[1:]) if key[:1] == "s" and key[1:].isdigit() else 0


def _reference(key: str) -> re.Pattern:
    return re.compile(rf"\bsteps\.{re.escape(key)}\b")


def _rename(value: Any, renames: dict[str, str]) -> Any:
    """Rewrite `steps.OLD` references in templates and conditions, everywhere in a value."""
    if isinstance(value, dict):
        return {name: _rename(item, renames) for name, item in value.items()}
    if isinstance(value, list):
        return [_rename(item, renames) for item in value]
    if not isinstance(value, str) or not renames:
        return value
    pattern = re.compile(r"\bsteps\.(" + "|".join(re.escape(key) for key in renames) + r")\b")
    return pattern.sub(lambda match: f"steps.{renames[match.group(1)]}", value)


def splice(steps: list[dict], key: str, answer: Any) -> Splice:
    """`steps` with step `key` replaced by the sub-steps in `answer` ({"steps": [...]})."""
    sub_steps = answer.get("steps") if isinstance(answer, dict) else None
    if (
        not isinstance(sub_steps, list)
        or not sub_steps
        or not all(isinstance(s, dict) and isinstance(s.get("key"), str) and s["key"] for s in sub_steps)
    ):
        raise NotASubPlan('the answer must be {"steps": [...]} with at least one sub-step, each with a key (a string)')
    clashing = sorted({s["key"] for s in sub_steps} & {step["key"] for step in steps})
    if clashing:
        # A sub-step named like a step of the plan would capture references meant for that step.
        raise NotASubPlan(f"sub-step keys {', '.join(clashing)} are already steps of the plan; use d1, d2, ...")
    index = next(i for i, step in enumerate(steps) if step["key"] == key)
    old = steps[index]
    first = max((_number(step["key"]) for step in steps), default=0) + 1
    renames = {sub["key"]: f"s{first + offset}" for offset, sub in enumerate(sub_steps)}
    if len(renames) != len(sub_steps):
        raise NotASubPlan("two sub-steps share a key; give each its own (d1, d2, ...)")
    new_steps = []
    for sub in sub_steps:
        inner = [renames.get(dep, dep) for dep in sub.get("depends_on") or [] if isinstance(dep, str)]
        step = {name: value for name, value in sub.items() if name not in {"risk", "tool_hash"}}
        step.update(
            key=renames[sub["key"]], args=_rename(sub.get("args") or {}, renames), condition=_rename(sub.get("condition") or "", renames)
        )
        if not any(dep in renames.values() for dep in inner):
            # A first sub-step starts where the old step started: after its inputs, under its condition.
            inner = list(dict.fromkeys([*old.get("depends_on", []), *inner]))
            # The old step's guard still holds: a sub-step's own condition can narrow it, never replace it.
            guard, own = old.get("condition", ""), step["condition"]
            step["condition"] = f"({guard}) and ({own})" if guard and own and guard != own else (guard or own)
        step["depends_on"] = inner
        new_steps.append(step)
    needed = {dep for step in new_steps for dep in step["depends_on"]}
    last = [step["key"] for step in new_steps if step["key"] not in needed]
    result = Splice(steps=[], new_keys=[s["key"] for s in new_steps], last_keys=last)
    for step in steps[:index] + [None] + steps[index + 1 :]:
        if step is None:
            result.steps.extend(new_steps)
            continue
        result.steps.append(_rewire(step, key, last, result))
    return result


def _rewire(step: dict, key: str, last: list[str], result: Splice) -> dict:
    step = {name: value for name, value in step.items() if name not in {"risk", "tool_hash"}}
    if key in step.get("depends_on", []):
        deps = []
        for dep in step["depends_on"]:
            deps.extend(last if dep == key else [dep])
        step["depends_on"] = list(dict.fromkeys(deps))
    reads = _reference(key)
    if reads.search(str(step.get("args"))) or reads.search(step.get("condition") or ""):
        # One last sub-step produces what the old step did; with several, the final one is assumed and a
        # reviewer is told to check it.
        target = last[-1]
        step["args"], step["condition"] = _rename(step.get("args"), {key: target}), _rename(step.get("condition") or "", {key: target})
        if len(last) == 1:
            result.rewired.append(f"{step['key']} now reads {target} instead of {key}")
        else:
            result.flagged.append(
                f"{step['key']} read {key}'s output and now reads {target}, one of its last sub-steps ({', '.join(last)}): check it"
            )
    return step
