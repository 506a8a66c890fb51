"""Plan schema and validation. Every plan, from any planner or any edit, passes through `validate_plan`;
an invalid plan is never stored as valid. Errors are per step and written for a person to read."""

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.strict_schema import NotStrictable, strict_object_schema
from core.text import control_character_problem, json_control_character_problems
from planning.expressions import ExpressionError, condition_refs, is_whole_template, template_refs
from tools.registry import ToolRegistry, registry

KEY_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,31}$"
MAX_ARGS_CHARS = 20_000
MAX_ARGS_DEPTH = 10


def _depth(value: Any, limit: int = MAX_ARGS_DEPTH + 1) -> int:
    """Nesting depth of a JSON value, counted only up to `limit` (so a hostile value cannot recurse deep)."""
    if limit <= 0 or not isinstance(value, (dict, list)):
        return 0
    children = value.values() if isinstance(value, dict) else value
    return 1 + max((_depth(child, limit - 1) for child in children), default=0)


class StepDraft(BaseModel):
    # Extra fields (a "risk" the model claims, say) are dropped: risk always comes from the registry.
    model_config = ConfigDict(extra="ignore")

    key: str = Field(pattern=KEY_PATTERN, description="Stable id: s1, s2, …")
    title: str = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=2000)
    tool: str = Field(min_length=1, max_length=100, description="Name of a tool from the catalogue")
    args: dict[str, Any] = Field(default_factory=dict, description="Arguments for the tool, matching its args_schema")
    depends_on: list[str] = Field(default_factory=list, description="Keys of steps that must finish first")
    condition: str = Field(default="", max_length=500, description="Optional: run only if true, e.g. steps.s1.output > steps.s2.output")
    success_criteria: str = Field(default="", max_length=1000)

    @field_validator("condition", "description", "success_criteria", mode="before")
    @classmethod
    def none_is_empty(cls, value):
        return "" if value is None else value


class PlanDraft(BaseModel):
    model_config = ConfigDict(extra="ignore")

    steps: list[StepDraft]


@dataclass(frozen=True)
class PlanIssue:
    step_key: str | None
    field: str
    message: str

    def __str__(self):
        where = f"step {self.step_key}" if self.step_key else "plan"
        return f"{where}, {self.field}: {self.message}" if self.field else f"{where}: {self.message}"

    def as_dict(self) -> dict:
        return {"step": self.step_key, "field": self.field, "message": self.message}


class PlanInvalid(Exception):
    def __init__(self, issues: list[PlanIssue]):
        self.issues = issues
        super().__init__("; ".join(str(issue) for issue in issues))


ARGS_AS_JSON_TEXT = {
    "type": "string",
    "description": 'The arguments as one JSON object written as a string, e.g. "{\\"queue\\": \\"support\\"}", matching the tool\'s args_schema',
}


def plan_json_schema(*, tools: ToolRegistry = registry) -> dict:
    """The plan's shape for strict structured output: one step branch per tool (the tool's name as a
    const, its arguments as that tool's closed schema). A tool whose arguments strict mode cannot
    express, or every tool of a catalogue larger than COUNTERSIGN_STRICT_SCHEMA_MAX_TOOLS, gets its
    arguments as a JSON string instead. Either way validate_plan is the wall; this is the first line."""
    step_fields = {name: field for name, field in StepDraft.model_json_schema()["properties"].items() if name not in {"tool", "args"}}
    common, _ = strict_object_schema({"type": "object", "properties": step_fields, "required": list(step_fields)})
    typed = len(tools.names()) <= settings.COUNTERSIGN_STRICT_SCHEMA_MAX_TOOLS
    branches, defs, as_text = [], {}, []
    for tool in tools.all():
        try:
            if not typed:
                raise NotStrictable("the catalogue is too large for one typed schema")
            args, tool_defs = strict_object_schema(tool.args_schema(), defs_prefix=f"{tool.name}__", templates=True)
        except NotStrictable:
            as_text.append(tool.name)
            continue
        defs.update(tool_defs)
        branches.append(_step_branch(common, {"type": "string", "const": tool.name}, args))
    if as_text or not branches:
        branches.append(_step_branch(common, {"type": "string", "enum": as_text} if as_text else {"type": "string"}, ARGS_AS_JSON_TEXT))
    return {
        "type": "object",
        "properties": {"steps": {"type": "array", "items": {"$ref": "#/$defs/StepDraft"}}},
        "required": ["steps"],
        "additionalProperties": False,
        "$defs": {"StepDraft": branches[0] if len(branches) == 1 else {"anyOf": branches}, **defs},
    }


def _step_branch(common: dict, tool: dict, args: dict) -> dict:
    properties = {**common["properties"], "tool": tool, "args": args}
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def _pydantic_issues(error: ValidationError, step_key: str | None, prefix: str = "") -> list[PlanIssue]:
    issues = []
    for item in error.errors():
        loc = [str(part) for part in item["loc"]]
        field = prefix + ".".join(loc) if loc else prefix.rstrip(".")
        issues.append(PlanIssue(step_key, field, item["msg"]))
    return issues


def _value_at(value: Any, loc: tuple) -> Any:
    for part in loc:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and isinstance(part, int) and part < len(value):
            value = value[part]
        else:
            return None
    return value


def check_args(tool_name: str, args: dict, *, tools: ToolRegistry = registry) -> list[str]:
    """Argument problems for a tool, as readable strings. A value that is a whole template is only known
    at run time, so type errors on it are left to the executor."""
    tool = tools.get(tool_name)
    if tool is None:
        return [f"unknown tool {tool_name!r}"]
    if _depth(args) > MAX_ARGS_DEPTH:
        return [f"arguments are nested more than {MAX_ARGS_DEPTH} levels deep"]
    if len(json.dumps(args, default=str)) > MAX_ARGS_CHARS:
        return [f"arguments are larger than {MAX_ARGS_CHARS} characters"]
    try:
        tool.args_model.model_validate(args)
    except ValidationError as error:
        problems = []
        for item in error.errors():
            if item["type"] != "missing" and is_whole_template(_value_at(args, item["loc"])):
                continue
            where = ".".join(str(part) for part in item["loc"]) or "arguments"
            problems.append(f"{where}: {item['msg']}")
        return problems
    return []


def _cycle(steps: list[StepDraft]) -> list[str] | None:
    graph = {step.key: [d for d in step.depends_on] for step in steps}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(key: str) -> list[str] | None:
        state[key] = 1
        path.append(key)
        for dep in graph.get(key, []):
            if dep not in graph:
                continue
            if state.get(dep) == 1:
                return path[path.index(dep) :] + [dep]
            if dep not in state and (found := visit(dep)):
                return found
        path.pop()
        state[key] = 2
        return None

    for key in graph:
        if key not in state and (found := visit(key)):
            return found
    return None


def _ancestors(steps: list[StepDraft]) -> dict[str, set[str]]:
    graph = {step.key: set(step.depends_on) for step in steps}
    memo: dict[str, set[str]] = {}

    def of(key: str) -> set[str]:
        if key not in memo:
            memo[key] = set()
            for dep in graph.get(key, ()):
                memo[key] |= {dep} | of(dep)
        return memo[key]

    return {key: of(key) for key in graph}


TEXT_FIELDS = ("title", "description", "tool", "condition", "success_criteria")


def _control_character_issues(step: StepDraft) -> list[PlanIssue]:
    """Control characters anywhere in a step's text or arguments: refused here, once, so every planner and
    every edit (views and API alike) is covered, and PostgreSQL never sees a NUL."""
    issues = [PlanIssue(step.key, field, problem) for field in TEXT_FIELDS if (problem := control_character_problem(getattr(step, field)))]
    # Deeper arguments are refused by check_args anyway; not walking them keeps the recursion bounded.
    if _depth(step.args) <= MAX_ARGS_DEPTH:
        for path, problem in json_control_character_problems(step.args):
            issues.append(PlanIssue(step.key, f"args.{path}" if path else "args", problem))
    issues += [PlanIssue(step.key, "depends_on", problem) for _, problem in json_control_character_problems(step.depends_on)]
    return issues


def validate_plan(data: Any, *, tools: ToolRegistry = registry, max_steps: int | None = None) -> list[dict]:
    """Validated steps (content fields, risk copied from the registry) or PlanInvalid with every issue."""
    max_steps = max_steps or settings.COUNTERSIGN_MAX_STEPS
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise PlanInvalid([PlanIssue(None, "steps", 'the plan must be a JSON object with a "steps" list')])
    raw_steps = data["steps"]
    if not raw_steps:
        raise PlanInvalid([PlanIssue(None, "steps", "the plan has no steps")])
    if len(raw_steps) > max_steps:
        raise PlanInvalid([PlanIssue(None, "steps", f"the plan has {len(raw_steps)} steps; at most {max_steps} are allowed")])

    issues: list[PlanIssue] = []
    steps: list[StepDraft] = []
    for index, raw in enumerate(raw_steps, start=1):
        label = raw.get("key") if isinstance(raw, dict) and isinstance(raw.get("key"), str) else f"#{index}"
        try:
            steps.append(StepDraft.model_validate(raw))
        except ValidationError as error:
            issues.extend(_pydantic_issues(error, label[:32]))
    for step in steps:
        issues.extend(_control_character_issues(step))
    if issues:
        raise PlanInvalid(issues)

    keys = [step.key for step in steps]
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            issues.append(PlanIssue(key, "key", f"duplicate key {key!r}"))
        seen.add(key)

    for step in steps:
        for problem in check_args(step.tool, step.args, tools=tools):
            field = "tool" if problem.startswith("unknown tool") else "args"
            issues.append(PlanIssue(step.key, field, problem))
        for dep in step.depends_on:
            if dep == step.key:
                issues.append(PlanIssue(step.key, "depends_on", "a step cannot depend on itself"))
            elif dep not in seen:
                issues.append(PlanIssue(step.key, "depends_on", f"depends on {dep!r}, which is not a step of this plan"))
        if len(set(step.depends_on)) != len(step.depends_on):
            issues.append(PlanIssue(step.key, "depends_on", "lists the same dependency twice"))

    cycle = _cycle(steps)
    if cycle:
        issues.append(PlanIssue(cycle[0], "depends_on", "dependency cycle: " + " → ".join(cycle)))
    ancestors = _ancestors(steps) if not cycle else {step.key: set(step.depends_on) for step in steps}

    for step in steps:
        try:
            for ref in sorted(template_refs(step.args) - ancestors[step.key]):
                issues.append(PlanIssue(step.key, "args", f"uses the output of {ref!r}, which is not among its dependencies"))
        except ExpressionError as error:
            issues.append(PlanIssue(step.key, "args", str(error)))
        if step.condition.strip():
            try:
                for ref in sorted(condition_refs(step.condition) - ancestors[step.key]):
                    issues.append(PlanIssue(step.key, "condition", f"refers to {ref!r}, which is not among its dependencies"))
            except ExpressionError as error:
                issues.append(PlanIssue(step.key, "condition", str(error)))

    if issues:
        raise PlanInvalid(issues)
    return [
        {
            "key": step.key,
            "title": step.title,
            "description": step.description,
            "tool": step.tool,
            "args": step.args,
            "depends_on": step.depends_on,
            "condition": step.condition.strip(),
            "success_criteria": step.success_criteria,
            "risk": str(tools.risk_of(step.tool).value),
            # The definition the approval will bind to, from the registry (never from a planner's text).
            "tool_hash": tools.get(step.tool).definition_hash,
        }
        for step in steps
    ]
