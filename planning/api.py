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
    approval_hash: str
    dry_run: dict[str, Any] | None = None


class Error(Schema):
    detail: Any


def plan_out(plan: Plan) -> dict:
    from planning import codeplans

    steps = list(plan.steps.all())
    dry_run = codeplans.current_dry_run(plan) if codeplans.is_code_plan(plan) else None
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
        "approval_hash": codeplans.approval_hash(plan, dry_run),
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


class StepIn(Schema):
    revision: int
    key: str | None = None
    title: str
    description: str = ""
    tool: str
    args: dict[str, Any] = {}
    depends_on: list[str] = []
    condition: str = ""
    success_criteria: str = ""


class StepPatch(Schema):
    revision: int
    title: str | None = None
    description: str | None = None
    tool: str | None = None
    args: dict[str, Any] | None = None
    depends_on: list[str] | None = None
    condition: str | None = None
    success_criteria: str | None = None


class DecisionIn(Schema):
    revision: int
    content_hash: str | None = None
    comment: str = ""


def _edit_error(error: services.ServiceError):
    body: dict[str, Any] = {"detail": error.message}
    if isinstance(error, services.InvalidEdit):
        body["issues"] = [issue.as_dict() for issue in error.issues]
    if isinstance(error, services.StaleRevision):
        body["current_revision"] = error.current
    return Status(error.status, body)


def _edited(request, plan_id: int, perform):
    get_plan_for_user(request.user, plan_id, need="edit")
    try:
        plan = perform()
    except services.ServiceError as error:
        return _edit_error(error)
    return plan_out(Plan.objects.select_related("goal", "goal__requester").get(pk=plan.pk))


class EditError(Schema):
    detail: Any
    issues: list[dict[str, Any]] | None = None
    current_revision: int | None = None


EDIT_RESPONSES = {200: PlanOut, 201: PlanOut, 403: Error, 404: Error, 409: EditError, 422: EditError}


@router.post("/plans/{plan_id}/steps", response=EDIT_RESPONSES, summary="Add a step (makes a new revision)")
def add_step(request, plan_id: int, payload: StepIn):
    fields = payload.dict(exclude={"revision"})
    if not fields.get("key"):
        fields.pop("key")
    result = _edited(
        request, plan_id, lambda: services.step_add(plan_id=plan_id, actor=request.user, revision=payload.revision, step=fields)
    )
    return Status(201, result) if isinstance(result, dict) else result


@router.patch("/plans/{plan_id}/steps/{key}", response=EDIT_RESPONSES, summary="Change a step's fields (makes a new revision)")
def update_step(request, plan_id: int, key: str, payload: StepPatch):
    changes = payload.dict(exclude={"revision"}, exclude_unset=True)
    return _edited(
        request,
        plan_id,
        lambda: services.step_update(plan_id=plan_id, actor=request.user, revision=payload.revision, key=key, changes=changes),
    )


@router.delete("/plans/{plan_id}/steps/{key}", response=EDIT_RESPONSES, summary="Delete a step (makes a new revision)")
def delete_step(request, plan_id: int, key: str, revision: int):
    return _edited(request, plan_id, lambda: services.step_delete(plan_id=plan_id, actor=request.user, revision=revision, key=key))


def _decide(request, plan_id: int, payload: DecisionIn, decision: str):
    from approvals.services import plan_decide

    get_plan_for_user(request.user, plan_id, need="approve")
    try:
        plan_decide(
            plan_id=plan_id,
            actor=request.user,
            revision=payload.revision,
            content_hash=payload.content_hash,
            decision=decision,
            comment=payload.comment,
        )
    except services.ServiceError as error:
        return _edit_error(error)
    return plan_out(Plan.objects.select_related("goal", "goal__requester").get(pk=plan_id))


@router.post("/plans/{plan_id}/approve", response=EDIT_RESPONSES, summary="Countersign the plan at this revision")
def approve_plan(request, plan_id: int, payload: DecisionIn):
    return _decide(request, plan_id, payload, "approved")


@router.post("/plans/{plan_id}/reject", response=EDIT_RESPONSES, summary="Reject the plan at this revision (comment required)")
def reject_plan(request, plan_id: int, payload: DecisionIn):
    return _decide(request, plan_id, payload, "rejected")


@router.post("/plans/{plan_id}/request-changes", response=EDIT_RESPONSES, summary="Ask the operator for changes (comment required)")
def request_changes(request, plan_id: int, payload: DecisionIn):
    return _decide(request, plan_id, payload, "changes_requested")


class GateOut(Schema):
    plan_id: int
    step_key: str
    title: str
    tool: str
    resolved_args: Any
    risk: str
    gate_hash: str
    goal: str


class GateDecisionIn(Schema):
    approve: bool
    comment: str = ""
    gate_hash: str | None = None


class Accepted(Schema):
    plan_id: int
    status: str


def _run_call(request, plan_id: int, perform, status: int):
    get_plan_for_user(request.user, plan_id, need="run")
    try:
        plan = perform()
    except services.ServiceError as error:
        return _edit_error(error)
    return Status(status, {"plan_id": plan.pk, "status": plan.status})


@router.post("/plans/{plan_id}/run", response={202: Accepted, 403: Error, 404: Error, 409: EditError}, summary="Run an approved plan")
def run_plan(request, plan_id: int):
    from planning import executor

    return _run_call(request, plan_id, lambda: executor.plan_run(plan_id=plan_id, actor=request.user), 202)


@router.post(
    "/plans/{plan_id}/cancel", response={200: Accepted, 403: Error, 404: Error, 409: EditError}, summary="Cancel a run: nothing new starts"
)
def cancel_plan(request, plan_id: int):
    from planning import executor

    return _run_call(request, plan_id, lambda: executor.plan_cancel(plan_id=plan_id, actor=request.user), 200)


@router.get("/gates", response=list[GateOut], summary="Runtime gates: HIGH steps waiting with their resolved arguments")
def list_gates(request, status: Literal["pending"] = "pending"):
    from planning.selectors import waiting_gates

    if not user_can(request.user, "view"):
        raise PermissionDenied("You may not view gates.")
    return [
        {
            "plan_id": s.plan_id,
            "step_key": s.key,
            "title": s.title,
            "tool": s.tool,
            "resolved_args": s.resolved_args,
            "risk": s.risk,
            "gate_hash": s.gate_hash,
            "goal": s.plan.goal.text,
        }
        for s in waiting_gates()
    ]


@router.post(
    "/plans/{plan_id}/steps/{key}/decision",
    response={200: StepOut, 403: Error, 404: Error, 409: EditError},
    summary="Approve or deny a waiting gate",
)
def decide_gate(request, plan_id: int, key: str, payload: GateDecisionIn):
    from planning import executor

    get_plan_for_user(request.user, plan_id, need="approve")
    try:
        executor.gate_decide(
            plan_id=plan_id, key=key, actor=request.user, approve=payload.approve, comment=payload.comment, gate_hash=payload.gate_hash
        )
    except services.ServiceError as error:
        return _edit_error(error)
    step = Plan.objects.get(pk=plan_id).steps.get(key=key)
    return {**step.content(), "position": step.position, "status": step.status, "output": step.output, "error": step.error}
