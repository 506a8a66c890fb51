"""Where a step's argument values come from, and whether untrusted data can reach them.

A countersigned plan fixes which tools run; templates such as `{{ steps.s2.output.text }}` still let what
a web page, an email or a model returned choose a later step's arguments (indirect prompt injection). So
every argument gets a provenance chain: the step output it reads, then whatever that step's own inputs
read, transitively, each entry labelled by its tool's `trusted_output`. An argument is tainted when any
entry in its chain is untrusted. A literal written in the approved plan has no chain and is trusted,
except one a replan wrote while untrusted facts were in its prompt (it may have copied the value from a
page): `Step.replan_sources` marks those, and their chain holds a "replan" entry that is untrusted.

Derived from the plan alone (templates and conditions are static), so the same answer is available at
review time (preflight, the policy fact `untrusted_input`) and at the gate.
"""

import re

from planning.expressions import REFERENCE_RE, TEMPLATE_RE
from tools.registry import registry

CONDITION = "(condition)"
CONDITION_REFERENCE_RE = re.compile(r"steps\.([A-Za-z][A-Za-z0-9_]*)\.output((?:\.[A-Za-z0-9_]+)*)")
DETAIL_CHARS = 80
REPLAN = "replan"
REPLANNER = "replanner"


def output_trusted(tool_name: str) -> bool:
    tool = registry.get(tool_name)
    return bool(tool is not None and tool.trusted_output)


def _template_refs(value) -> list[tuple[str, str]]:
    if isinstance(value, dict):
        return [ref for item in value.values() for ref in _template_refs(item)]
    if isinstance(value, list):
        return [ref for item in value for ref in _template_refs(item)]
    if not isinstance(value, str):
        return []
    refs = []
    for inner in TEMPLATE_RE.findall(value):
        match = REFERENCE_RE.match(inner)
        if match is not None:
            refs.append((match.group(1), match.group(2)))
    return refs


def direct_sources(step) -> dict[str, list[tuple[str, str]]]:
    """{argument (or "(condition)"): [(step key, output path)]} for what a step reads directly."""
    args = step.args if isinstance(step.args, dict) else {}
    sources = {name: refs for name, value in args.items() if (refs := _template_refs(value))}
    condition_refs = [(m.group(1), m.group(2)) for m in CONDITION_REFERENCE_RE.finditer(step.condition or "")]
    if condition_refs:
        sources[CONDITION] = condition_refs
    return sources


def _detail(step) -> str:
    """A short hint of what the source step read, e.g. the URL an http_get fetched."""
    args = step.resolved_args if isinstance(getattr(step, "resolved_args", None), dict) else step.args
    text = next((value for value in (args or {}).values() if isinstance(value, str) and value), "")
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


def step_provenance(step, by_key: dict) -> dict[str, list[dict]]:
    """{argument: [{step, path, tool, trusted, detail}]}: the output each argument reads first, then what
    fed that output, transitively (each source step once per argument)."""
    provenance = {}
    for argument, refs in direct_sources(step).items():
        chain: list[dict] = []
        seen: set[str] = set()
        pending = list(refs)
        while pending:
            key, path = pending.pop(0)
            source = by_key.get(key)
            if source is None or key in seen:
                continue
            seen.add(key)
            chain.append(
                {
                    "step": key,
                    "path": f"output{path}",
                    "tool": source.tool,
                    "trusted": output_trusted(source.tool),
                    "detail": _detail(source),
                }
            )
            # A trusted tool called with a value a replan copied from a page returns what the page chose.
            chain.extend(entry for entry in _replan_entries(source) if entry not in chain)
            pending.extend(ref for upstream in direct_sources(source).values() for ref in upstream)
        provenance[argument] = chain
    for argument, mark in _replan_sources(step).items():
        provenance.setdefault(argument, []).append(replan_entry(mark))
    return provenance


def _replan_sources(step) -> dict:
    return getattr(step, "replan_sources", None) or {}


def _replan_entries(step) -> list[dict]:
    entries = [replan_entry(mark) for mark in _replan_sources(step).values()]
    return [entry for index, entry in enumerate(entries) if entry not in entries[:index]]


def replan_entry(mark: dict) -> dict:
    """The provenance entry of a value a replan wrote after reading untrusted facts."""
    facts = ", ".join(mark.get("facts", []))
    return {
        "step": REPLAN,
        "path": facts,
        "tool": REPLANNER,
        "trusted": False,
        "detail": f"replan {mark.get('replan', '?')} wrote it after reading untrusted facts from {facts}",
    }


def replan_marks(new_step: dict, previous: dict | None, *, replan: int, facts: list[str]) -> dict[str, dict]:
    """Which values of a step a replan wrote rather than carried over verbatim from the revision that
    ran: every argument (and the condition) that differs from that revision's step of the same key, or
    all of them when the step is new or calls another tool."""
    same_call = previous is not None and previous.get("tool") == new_step.get("tool")
    old_args = (previous or {}).get("args") or {} if same_call else {}
    mark = {"replan": replan, "facts": list(facts)}
    marks = {name: mark for name, value in (new_step.get("args") or {}).items() if name not in old_args or old_args[name] != value}
    if new_step.get("condition") and (not same_call or previous.get("condition") != new_step["condition"]):
        marks[CONDITION] = mark
    return marks


def untrusted_arguments(provenance: dict | None) -> list[str]:
    """The arguments (and "(condition)") whose chain holds untrusted data."""
    return [name for name, chain in (provenance or {}).items() if any(not entry["trusted"] for entry in chain)]


def plan_provenance(steps) -> dict[str, dict[str, list[dict]]]:
    """Every step's provenance, from the plan's steps (one pass, no queries)."""
    by_key = {step.key: step for step in steps}
    return {step.key: step_provenance(step, by_key) for step in steps}
