"""Policies as code: Cedar files that decide, per plan and per step, who must approve what.

Files live in COUNTERSIGN_POLICY_DIR (`*.cedar`) and are checked against `policies/schema.cedarschema` at
start-up. Cedar answers allow or deny; Countersign reads what a matching policy means from its annotations:

- `forbid` on `approve_plan` or `run_step`: the step is denied and the plan cannot be approved
  (`@reason` is shown at the step);
- `permit` on `approve_plan` with `@approvals("N")` and optionally `@groups("finance,legal")`: N distinct
  approvers (from those groups) must countersign the same content;
- `permit` on `run_step` with `@gate("required")`: the step waits at a runtime gate (HIGH always does);
- `forbid` on `decide_gate`: the gate cannot be approved (by this principal), with its reason;
- `permit` on `decide_gate` with `@groups(...)`: only members of those groups may approve the gate.

A file whose first line is `// mode: shadow` is evaluated and reported, never enforced. This module gets
plain data (StepFacts) from the apps above it and imports none of them.
"""

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import cedarpy
from django.conf import settings

from core.canonical import canonical_json, sha256_of

SCHEMA_PATH = Path(__file__).parent / "policies" / "schema.cedarschema"
SHADOW_MARKER = "// mode: shadow"
DENYING_ACTIONS = {"approve_plan", "run_step"}


class PolicyFileError(Exception):
    """A policy file that does not parse or does not fit the schema; names the file and the line."""

    def __init__(self, path: str, line: int, message: str):
        super().__init__(f"{path}:{line}: {message}")
        self.path, self.line, self.message = path, line, message


@dataclass(frozen=True, eq=False)
class Rule:
    """One policy of one file, with where it was written."""

    file: str
    line: int
    effect: str
    actions: tuple[str, ...]
    annotations: dict
    shadow: bool
    text: str

    @property
    def name(self) -> str:
        return self.annotations.get("id") or f"{self.file}:{self.line}"

    @property
    def reason(self) -> str:
        return self.annotations.get("reason") or f"{self.effect} in {self.file} line {self.line}"

    @property
    def approvals(self) -> int | None:
        value = self.annotations.get("approvals")
        return int(value) if value else None

    @property
    def groups(self) -> tuple[str, ...]:
        return tuple(sorted(g.strip() for g in self.annotations.get("groups", "").split(",") if g.strip()))

    def applies_to(self, action: str) -> bool:
        return not self.actions or action in self.actions


@dataclass(frozen=True)
class StepFacts:
    """What a policy may know about one step: plain data, filled in by planning or execution."""

    plan_id: int
    key: str
    tool: str
    source: str
    risk: str
    requester: str
    args: dict
    resolved: bool = False
    amount: float | None = None
    # An argument or the condition reads data from an untrusted source (planning/provenance.py).
    untrusted_input: bool = False


@dataclass(frozen=True)
class Requirement:
    count: int
    groups: tuple[str, ...]
    policy: str
    reason: str

    def eligible(self, groups_of_approver: set[str]) -> bool:
        return not self.groups or bool(groups_of_approver & set(self.groups))


@dataclass(frozen=True)
class Applied:
    """A policy that matched a step, as the plan page lists it."""

    policy: str
    file: str
    line: int
    action: str
    effect: str
    reason: str
    shadow: bool


@dataclass
class StepVerdict:
    key: str
    denials: list[Applied] = field(default_factory=list)
    gate_denials: list[Applied] = field(default_factory=list)
    requirements: list[Requirement] = field(default_factory=list)
    gate_required: bool = False
    gate_reasons: list[str] = field(default_factory=list)
    gate_groups: set[str] = field(default_factory=set)
    applied: list[Applied] = field(default_factory=list)

    @property
    def shadow(self) -> list[Applied]:
        return [a for a in self.applied if a.shadow]


BUILT_IN_REQUIREMENT = Requirement(count=1, groups=(), policy="built-in", reason="Every plan needs one approver.")


def _policy_chunks(text: str) -> list[tuple[int, str]]:
    """Split a policy file into (first line, text) per policy: a policy ends at a `;` outside strings
    and comments. Done here, not by Cedar, so an error can name the line of the policy it is in."""
    chunks, start, line, start_line, i = [], 0, 1, None, 0
    while i < len(text):
        char = text[i]
        if char == "\n":
            line += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif char == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                line += text[i] == "\n"
                i += 2 if text[i] == "\\" else 1
        elif char == ";":
            chunks.append((start_line or line, text[start : i + 1]))
            start, start_line = i + 1, None
        elif not char.isspace() and start_line is None:
            start_line = line
        i += 1
    if text[start:].strip() and start_line is not None:
        chunks.append((start_line, text[start:]))
    return chunks


def _actions_of(est: dict) -> tuple[str, ...]:
    scope = est.get("action", {})
    if scope.get("op") == "==":
        return (scope["entity"]["id"],)
    if scope.get("op") == "in" and "entities" in scope:
        return tuple(entity["id"] for entity in scope["entities"])
    return ()


def _rule_of(path: Path, line: int, chunk: str, schema: str, shadow: bool) -> Rule:
    try:
        est = json.loads(cedarpy.policies_to_json_str(chunk))["staticPolicies"]
    except ValueError as error:
        raise PolicyFileError(str(path), line, str(error)) from None
    if len(est) != 1:
        raise PolicyFileError(str(path), line, "expected exactly one policy ending with ';'")
    result = cedarpy.validate_policies(chunk, schema)
    if not result.validation_passed:
        raise PolicyFileError(str(path), line, "; ".join(error.error.removeprefix("for policy `policy0`, ") for error in result.errors))
    policy = next(iter(est.values()))
    annotations = policy.get("annotations", {})
    if annotations.get("approvals") and not annotations["approvals"].isdigit():
        raise PolicyFileError(str(path), line, '@approvals must be a whole number, like @approvals("2")')
    return Rule(path.name, line, policy["effect"], _actions_of(policy), annotations, shadow, chunk)


def rules_from_file(path: Path, schema: str) -> list[Rule]:
    text = path.read_text()
    shadow = text.lstrip().startswith(SHADOW_MARKER)
    return [_rule_of(path, line, chunk, schema, shadow) for line, chunk in _policy_chunks(text)]


@lru_cache(maxsize=4)
def _rules_in(directory: str) -> tuple[Rule, ...]:
    schema = SCHEMA_PATH.read_text()
    files = sorted(Path(directory).glob("*.cedar"))
    return tuple(rule for path in files for rule in rules_from_file(path, schema))


def policy_directory() -> str:
    return str(settings.COUNTERSIGN_POLICY_DIR)


def rules() -> tuple[Rule, ...]:
    """Every policy in force or in shadow, parsed and validated once per directory."""
    return _rules_in(policy_directory())


def reload() -> None:
    _rules_in.cache_clear()
    _matching_set.cache_clear()


def check_policies() -> list[PolicyFileError]:
    """Start-up check: every file parses and fits the schema."""
    reload()
    try:
        rules()
    except PolicyFileError as error:
        return [error]
    return []


@lru_cache(maxsize=4)
def _matching_set(directory: str) -> str:
    """All rules as permits, in order: Cedar then names every rule that matches (`policyN` is rule N),
    where a real forbid would hide the permits it overrides."""
    policies = []
    for rule in _rules_in(directory):
        est = json.loads(cedarpy.policies_to_json_str(rule.text))
        for policy in est["staticPolicies"].values():
            policy["effect"], policy["annotations"] = "permit", {}
        policies.append(cedarpy.policies_from_json_str(json.dumps(est)).strip())
    return "\n".join(policies)


def _argument_tags(args: dict) -> dict[str, str]:
    return {str(name): value if isinstance(value, str) else canonical_json(value) for name, value in args.items()}


def _entities(facts: list[StepFacts], principal: str, groups: set[str]) -> list[dict]:
    entities = [{"uid": {"type": "Group", "id": group}, "attrs": {}, "parents": []} for group in sorted(groups)]
    entities.append(
        {
            "uid": {"type": "User", "id": principal},
            "attrs": {"name": principal},
            "parents": [{"type": "Group", "id": g} for g in sorted(groups)],
        }
    )
    for fact in facts:
        attrs = {
            "plan_id": fact.plan_id,
            "key": fact.key,
            "tool": fact.tool,
            "source": fact.source,
            "risk": fact.risk,
            "requester": fact.requester,
            "resolved": fact.resolved,
            "untrusted_input": fact.untrusted_input,
        }
        if fact.amount is not None:
            attrs["amount"] = math.ceil(fact.amount)
        uid = {"type": "Step", "id": f"{fact.plan_id}/{fact.key}"}
        entities.append({"uid": uid, "attrs": attrs, "parents": [], "tags": _argument_tags(fact.args)})
    return entities


def evaluate(facts: list[StepFacts], *, principal: str = "", groups: set[str] | frozenset[str] = frozenset()) -> list[StepVerdict]:
    """What the policies decide for each step, for this principal (anyone, when unnamed)."""
    rule_set = rules()
    verdicts = [StepVerdict(key=fact.key) for fact in facts]
    if not rule_set or not facts:
        return [_with_defaults(verdict, fact) for verdict, fact in zip(verdicts, facts, strict=True)]
    actions = ("approve_plan", "run_step", "decide_gate")
    requests = [
        {
            "principal": {"type": "User", "id": principal},
            "action": {"type": "Action", "id": action},
            "resource": {"type": "Step", "id": f"{fact.plan_id}/{fact.key}"},
            "context": {},
        }
        for fact in facts
        for action in actions
    ]
    results = cedarpy.is_authorized_batch(requests, _matching_set(policy_directory()), _entities(facts, principal, set(groups)))
    for index, result in enumerate(results):
        verdict, action = verdicts[index // len(actions)], actions[index % len(actions)]
        for reason in result.diagnostics.reasons:
            _apply(verdict, rule_set[int(reason.removeprefix("policy"))], action)
    return [_with_defaults(verdict, fact) for verdict, fact in zip(verdicts, facts, strict=True)]


def _apply(verdict: StepVerdict, rule: Rule, action: str) -> None:
    applied = Applied(rule.name, rule.file, rule.line, action, rule.effect, rule.reason, rule.shadow)
    verdict.applied.append(applied)
    if rule.shadow:
        return
    if rule.effect == "forbid" and action in DENYING_ACTIONS:
        verdict.denials.append(applied)
    elif rule.effect == "forbid" and action == "decide_gate":
        verdict.gate_denials.append(applied)
    elif action == "decide_gate" and rule.groups:
        verdict.gate_groups.update(rule.groups)
    elif action == "approve_plan" and rule.approvals:
        verdict.requirements.append(Requirement(rule.approvals, rule.groups, rule.name, rule.reason))
    elif action == "run_step" and rule.annotations.get("gate") == "required":
        verdict.gate_required = True
        verdict.gate_reasons.append(rule.reason)


def _with_defaults(verdict: StepVerdict, fact: StepFacts) -> StepVerdict:
    # HIGH is gated whatever the files say: lifting a HIGH gate is a standing grant's job, not a policy's.
    if fact.risk == "high" and not verdict.gate_required:
        verdict.gate_required = True
        verdict.gate_reasons.append("HIGH risk steps always wait for a runtime approval.")
    return verdict


def plan_requirements(verdicts: list[StepVerdict]) -> list[Requirement]:
    """The approvals a plan needs: every distinct requirement of its steps (one approver at least)."""
    found = {(r.count, r.groups, r.policy): r for verdict in verdicts for r in verdict.requirements}
    return list(found.values()) or [BUILT_IN_REQUIREMENT]


NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


@dataclass(frozen=True)
class ApprovalProgress:
    have: int
    need: int
    missing: list[str]

    @property
    def complete(self) -> bool:
        return not self.missing

    def describe(self) -> str:
        text = f"{self.have} of {self.need} approval{'s' if self.need != 1 else ''}"
        return text + (f" (needs {'; '.join(self.missing)})" if self.missing else "")


def approval_progress(requirements: list[Requirement], approvers: dict[str, set[str]]) -> ApprovalProgress:
    """How far distinct approvers (username -> groups) go towards every requirement."""
    missing = []
    for requirement in requirements:
        eligible = sum(1 for groups in approvers.values() if requirement.eligible(groups))
        if eligible < requirement.count:
            short = requirement.count - eligible
            more = NUMBER_WORDS.get(short, str(short)) + " more"
            names = ", ".join(requirement.groups)
            missing.append(f"{more} from group {names}" if requirement.groups else more)
    need = max(r.count for r in requirements)
    return ApprovalProgress(have=min(len(approvers), need), need=need, missing=missing)


def useful_approver(requirements: list[Requirement], approvers: dict[str, set[str]], groups: set[str]) -> bool:
    """Whether one more approver with `groups` brings an unmet requirement closer (or none is unmet)."""
    progress = approval_progress(requirements, approvers)
    if progress.complete:
        return True
    return any(r.eligible(groups) and sum(1 for g in approvers.values() if r.eligible(g)) < r.count for r in requirements)


def policy_version() -> str:
    return sha256_of([[rule.file, rule.line, rule.text, rule.shadow] for rule in rules()])


def policy_summaries() -> list[dict]:
    """The policies as the Policies page and API list them."""
    return [
        {
            "id": rule.name,
            "file": rule.file,
            "line": rule.line,
            "effect": rule.effect,
            "actions": list(rule.actions),
            "reason": rule.reason,
            "approvals": rule.approvals,
            "groups": list(rule.groups),
            "gate": rule.annotations.get("gate", ""),
            "shadow": rule.shadow,
            "text": rule.text.strip(),
        }
        for rule in rules()
    ]
