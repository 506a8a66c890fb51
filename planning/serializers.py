"""What the API says about a plan: response schemas, the plan's JSON form, and refusals as JSON.
Shared by the planning and execution routers."""

from typing import Any

from ninja import Schema, Status

from core.errors import ServiceError
from planning import alternatives, dry_runs, estimates, ledger, usage
from planning.models import Goal, Plan
from planning.services import InvalidEdit, StaleRevision


class StepOut(Schema):
    key: str
    position: int
    title: str
    description: str
    tool: str
    args: dict[str, Any]
    depends_on: list[str]
    condition: str
    success_criteria: str
    risk: str
    status: str
    output: Any = None
    error: str


class ApprovalOut(Schema):
    kind: str
    decision: str
    approver: str
    comment: str
    revision: int
    content_hash: str
    created_at: str
    voided: bool


class LlmUsageOut(Schema):
    calls: int
    tokens_in: int
    tokens_out: int
    cost_usd: float


class BudgetOut(Schema):
    usd: float | None = None
    tokens: int | None = None


class PreflightFinding(Schema):
    check: str
    severity: str
    step: str
    message: str
    fix: str


class FactOut(Schema):
    step: str
    title: str
    status: str
    fact: str
    method: str
    # False when the text came from untrusted data (a web page, a model, an open-world tool): data to
    # check, which a replan must not copy argument values from unseen.
    trusted: bool


class PlanOut(Schema):
    id: int
    goal_id: int
    goal: str
    requester: str
    status: str
    revision: int
    content_hash: str
    planner: str
    planner_source: str
    model: str
    tokens_in: int
    tokens_out: int
    latency_ms: int
    output_mode: str
    llm_usage: LlmUsageOut
    budget: BudgetOut
    failure_reason: str
    answer_text: str
    steps: list[StepOut]
    approvals: list[ApprovalOut]
    approval_hash: str
    dry_run: dict[str, Any] | None = None
    # Preflight findings of this revision: {check, severity, step, message, fix}, most severe first.
    preflight: list[PreflightFinding] = []
    # Duration (p50/p90 seconds along the critical path, None when a tool never ran), LLM cost, blast radius.
    estimates: dict[str, Any] = {}
    # The run's facts ledger: what each finished step found, which the answer cites as [key].
    ledger: list[FactOut] = []
    # Set when the plan was one of its goal's alternatives (GET /api/goals/{id} compares them).
    alternative_score: float | None = None
    alternative_reason: str = ""


class AlternativeOut(Schema):
    plan_id: int
    score: float
    reason: str
    status: str


class GoalOut(Schema):
    id: int
    text: str
    mode: str
    requester: str
    plans: list[int]
    # Every draft that was one of the goal's alternatives, best score first: `alternative` until one is
    # chosen, then the chosen one moves on (awaiting approval...) and the rest are `superseded`.
    alternatives: list[AlternativeOut]


def goal_out(goal: Goal) -> dict:
    return {
        "id": goal.pk,
        "text": goal.text,
        "mode": goal.mode,
        "requester": goal.requester.get_username(),
        "plans": list(goal.plans.order_by("id").values_list("id", flat=True)),
        "alternatives": [
            {"plan_id": plan.pk, "score": plan.alternative_score, "reason": plan.alternative_reason, "status": plan.status}
            for plan in alternatives.goal_alternatives(goal)
        ],
    }


class Error(Schema):
    detail: Any


def plan_out(plan: Plan) -> dict:
    steps = list(plan.steps.all())
    dry_run = dry_runs.current_dry_run(plan) if dry_runs.is_code_plan(plan) else None
    approvals = list(plan.approvals.select_related("approver"))
    return {
        "id": plan.pk,
        "goal_id": plan.goal_id,
        "goal": plan.goal.text,
        "requester": plan.goal.requester.get_username(),
        "status": plan.status,
        "revision": plan.revision,
        "content_hash": plan.content_hash,
        "planner": plan.planner,
        "planner_source": plan.planner_source,
        "model": plan.model,
        "tokens_in": plan.tokens_in,
        "tokens_out": plan.tokens_out,
        "latency_ms": plan.latency_ms,
        "output_mode": plan.output_mode,
        "llm_usage": plan.llm_usage(),
        "budget": _budget_out(plan),
        "failure_reason": plan.failure_reason,
        "answer_text": plan.answer_text,
        "steps": [
            {**step.content(), "position": step.position, "status": step.status, "output": step.output, "error": step.error}
            for step in steps
        ],
        "preflight": plan.preflight,
        "ledger": [{**entry, "method": fact.method} for fact, entry in _ledger(plan)],
        "alternative_score": plan.alternative_score,
        "alternative_reason": plan.alternative_reason,
        "estimates": estimates.plan_estimates(plan, steps).as_dict(),
        "approval_hash": dry_runs.approval_hash(plan, dry_run),
        "dry_run": None
        if dry_run is None
        else {
            "result": dry_run.result,
            "effects": [{k: v for k, v in e.items() if k != "row_id"} for e in dry_run.effects],
            "effects_hash": dry_run.effects_hash,
            "status": dry_run.status,
            "message": dry_run.message,
        },
        "approvals": [
            {
                "kind": approval.kind,
                "decision": approval.decision,
                "approver": approval.approver.get_username(),
                "comment": approval.comment,
                "revision": approval.revision,
                "content_hash": approval.content_hash,
                "created_at": approval.created_at.isoformat(),
                "voided": approval.voided_at is not None,
            }
            for approval in approvals
        ],
    }


def _ledger(plan: Plan) -> list:
    facts = ledger.ledger_of(plan.pk)
    return list(zip(facts, ledger.ledger_payload(facts), strict=True))


def _budget_out(plan: Plan) -> dict:
    budget = usage.budget_of(plan)
    return {"usd": None if budget.usd is None else float(budget.usd), "tokens": budget.tokens}


class EditError(Schema):
    detail: Any
    issues: list[dict[str, Any]] | None = None
    current_revision: int | None = None


EDIT_RESPONSES = {200: PlanOut, 201: PlanOut, 403: Error, 404: Error, 409: EditError, 422: EditError}


def error_response(error: ServiceError):
    """A refused service call as the API's JSON body, with the edit issues or the current revision."""
    body: dict[str, Any] = {"detail": error.message}
    if isinstance(error, InvalidEdit):
        body["issues"] = [issue.as_dict() for issue in error.issues]
    if isinstance(error, StaleRevision):
        body["current_revision"] = error.current
    return Status(error.status, body)
