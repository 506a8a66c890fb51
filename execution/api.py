"""The run API: run and cancel plans, list and answer runtime gates (django-ninja; mounted in project/api.py)."""

from typing import Any, Literal

from django.core.exceptions import PermissionDenied
from ninja import Router, Schema, Status
from pydantic import Field

from core.errors import ServiceError
from core.roles import user_can
from execution import engine, gates
from planning.models import Plan
from planning.permissions import get_plan_for_user
from planning.selectors import waiting_gates
from planning.serializers import EditError, Error, StepOut, error_response

router = Router()


class GateOut(Schema):
    plan_id: int
    step_key: str
    title: str
    tool: str
    resolved_args: Any
    risk: str
    gate_hash: str
    goal: str
    # {argument: [{step, path, tool, trusted, detail}]}: where each value came from, first the output it
    # reads, then what fed that output; an untrusted entry means open-world data chose the value.
    provenance: dict[str, list[dict]] = {}


class GateDecisionIn(Schema):
    approve: bool
    comment: str = ""
    # Required: the decision binds to the resolved arguments the approver saw (GET /api/gates).
    gate_hash: str = Field(min_length=1, max_length=64, description="The gate_hash of the waiting step, from GET /api/gates")
    args: dict | None = Field(None, description="Edit and approve: the corrected arguments (same tool); needs approve=true")


class Accepted(Schema):
    plan_id: int
    status: str


def _run_call(request, plan_id: int, perform, status: int):
    get_plan_for_user(request.user, plan_id, need="run")
    try:
        plan = perform()
    except ServiceError as error:
        return error_response(error)
    return Status(status, {"plan_id": plan.pk, "status": plan.status})


@router.post("/plans/{plan_id}/run", response={202: Accepted, 403: Error, 404: Error, 409: EditError}, summary="Run an approved plan")
def run_plan(request, plan_id: int):
    return _run_call(request, plan_id, lambda: engine.plan_run(plan_id=plan_id, actor=request.user), 202)


@router.post(
    "/plans/{plan_id}/cancel", response={200: Accepted, 403: Error, 404: Error, 409: EditError}, summary="Cancel a run: nothing new starts"
)
def cancel_plan(request, plan_id: int):
    return _run_call(request, plan_id, lambda: engine.plan_cancel(plan_id=plan_id, actor=request.user), 200)


@router.get("/gates", response=list[GateOut], summary="Runtime gates: HIGH steps waiting with their resolved arguments")
def list_gates(request, status: Literal["pending"] = "pending"):
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
            "provenance": s.provenance or {},
        }
        for s in waiting_gates()
    ]


@router.post(
    "/plans/{plan_id}/steps/{key}/decision",
    response={200: StepOut, 403: Error, 404: Error, 409: EditError, 422: EditError},
    summary="Approve or deny a waiting gate",
)
def answer_gate(request, plan_id: int, key: str, payload: GateDecisionIn):
    get_plan_for_user(request.user, plan_id, need="approve")
    try:
        gates.gate_answer(
            plan_id=plan_id,
            key=key,
            actor=request.user,
            approve=payload.approve,
            comment=payload.comment,
            gate_hash=payload.gate_hash,
            args=payload.args,
        )
    except ServiceError as error:
        return error_response(error)
    step = Plan.objects.get(pk=plan_id).steps.get(key=key)
    return {**step.content(), "position": step.position, "status": step.status, "output": step.output, "error": step.error}
