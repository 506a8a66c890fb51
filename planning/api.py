from typing import Any, Literal

from django.core.exceptions import PermissionDenied
from ninja import Router, Schema, Status
from pydantic import Field

from planning import services
from planning.models import Plan
from planning.permissions import get_plan_for_user, user_can
from planning.tools.registry import registry

router = Router()


class ToolOut(Schema):
    name: str
    description: str
    risk: str
    idempotent: bool
    timeout_s: float
    args_schema: dict[str, Any]


class GoalIn(Schema):
    text: str = Field(min_length=1, max_length=services.MAX_GOAL_CHARS)
    mode: Literal["steps", "code"] = "steps"
    planner: Literal["", "llm", "playbook"] = ""


class GoalCreated(Schema):
    goal_id: int
    plan_id: int
    status: str


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
    failure_reason: str
    answer_text: str
    steps: list[StepOut]
    approvals: list[ApprovalOut]


class Error(Schema):
    detail: Any


def plan_out(plan: Plan) -> dict:
    steps = list(plan.steps.all())
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
        "failure_reason": plan.failure_reason,
        "answer_text": plan.answer_text,
        "steps": [
            {**step.content(), "position": step.position, "status": step.status, "output": step.output, "error": step.error}
            for step in steps
        ],
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


@router.get("/tools", response={200: list[ToolOut], 403: Error}, summary="The tool catalogue with risk tiers and argument schemas")
def list_tools(request):
    if not user_can(request.user, "view"):
        raise PermissionDenied("You may not view tools.")
    return [tool.catalogue_entry() for tool in registry.all()]


@router.post("/goals", response={201: GoalCreated, 403: Error, 422: Error}, summary="Submit a goal; planning is queued")
def create_goal(request, payload: GoalIn):
    if not user_can(request.user, "submit"):
        return Status(403, {"detail": "Only operators can submit goals."})
    plan = services.goal_submit(requester=request.user, text=payload.text, mode=payload.mode, planner_choice=payload.planner)
    return Status(201, {"goal_id": plan.goal_id, "plan_id": plan.pk, "status": plan.status})


@router.get("/plans/{plan_id}", response={200: PlanOut, 403: Error, 404: Error}, summary="A plan with its steps and approvals")
def get_plan(request, plan_id: int):
    return plan_out(get_plan_for_user(request.user, plan_id))
