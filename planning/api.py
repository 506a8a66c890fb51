"""The review API: goals, plans, step edits and countersigning (django-ninja; mounted in project/api.py)."""

from typing import Any, Literal

from ninja import Router, Schema, Status
from pydantic import Field

from core.errors import ServiceError
from core.roles import user_can
from planning import review, services
from planning.models import Plan
from planning.permissions import get_goal_for_user, get_plan_for_user
from planning.serializers import EDIT_RESPONSES, EditError, Error, GoalOut, PlanOut, error_response, goal_out, plan_out

router = Router()


class GoalIn(Schema):
    text: str = Field(min_length=1, max_length=services.MAX_GOAL_CHARS)
    mode: Literal["steps", "code"] = "steps"
    planner: Literal["", "llm", "playbook"] = ""
    budget_usd: float | None = Field(default=None, gt=0, le=1_000_000, description="This plan's LLM budget in USD")
    budget_tokens: int | None = Field(default=None, gt=0, le=2_000_000_000, description="This plan's LLM budget in tokens")
    alternatives: int = Field(default=1, ge=1, le=4, description="How many distinct plans to draft for the operator to choose from")


class GoalCreated(Schema):
    goal_id: int
    plan_id: int
    status: str


@router.post("/goals", response={201: GoalCreated, 403: Error, 422: Error}, summary="Submit a goal; planning is queued")
def create_goal(request, payload: GoalIn):
    if not user_can(request.user, "submit"):
        return Status(403, {"detail": "Only operators can submit goals."})
    plan = services.goal_submit_within_budget(
        requester=request.user,
        text=payload.text,
        mode=payload.mode,
        planner_choice=payload.planner,
        budget_usd=payload.budget_usd,
        budget_tokens=payload.budget_tokens,
        alternatives=payload.alternatives,
    )
    return Status(201, {"goal_id": plan.goal_id, "plan_id": plan.pk, "status": plan.status})


@router.get("/goals/{goal_id}", response={200: GoalOut, 403: Error, 404: Error}, summary="A goal with its plans and alternatives")
def get_goal(request, goal_id: int):
    return goal_out(get_goal_for_user(request.user, goal_id))


class ChooseIn(Schema):
    plan_id: int


@router.post(
    "/goals/{goal_id}/choose",
    response={200: GoalOut, 403: Error, 404: Error, 409: Error, 422: Error},
    summary="Choose one alternative as the goal's plan; the others become superseded",
)
def choose_alternative(request, goal_id: int, payload: ChooseIn):
    get_goal_for_user(request.user, goal_id, need="edit")
    try:
        services.alternative_choose(goal_id=goal_id, plan_id=payload.plan_id, actor=request.user)
    except ServiceError as error:
        return error_response(error)
    return goal_out(get_goal_for_user(request.user, goal_id))


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
    # Required: a countersignature binds to the exact content the approver saw (for a code plan, its
    # dry run's diff too); without it an API client could approve something it never looked at.
    content_hash: str = Field(min_length=1, max_length=64, description="The content_hash (approval hash) of the plan as you reviewed it")
    comment: str = ""


def _edited(request, plan_id: int, perform):
    get_plan_for_user(request.user, plan_id, need="edit_steps")
    try:
        plan = perform()
    except ServiceError as error:
        return error_response(error)
    return plan_out(Plan.objects.select_related("goal", "goal__requester").get(pk=plan.pk))


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


class AlternativesIn(Schema):
    count: int = Field(ge=2, le=4, description="How many more drafts to ask for")


@router.post(
    "/plans/{plan_id}/alternatives",
    response={202: GoalCreated, 403: Error, 404: Error, 409: Error, 422: Error},
    summary="Draft alternatives to this plan: it joins the comparison and a new plan drafts `count` more",
)
def draft_alternatives(request, plan_id: int, payload: AlternativesIn):
    get_plan_for_user(request.user, plan_id, need="edit")
    try:
        drafting = services.alternatives_request(plan_id=plan_id, actor=request.user, count=payload.count)
    except ServiceError as error:
        return error_response(error)
    return Status(202, {"goal_id": drafting.goal_id, "plan_id": drafting.pk, "status": drafting.status})


class DecomposeIn(Schema):
    revision: int


class Accepted(Schema):
    plan_id: int
    revision: int
    detail: str


@router.post(
    "/plans/{plan_id}/steps/{key}/decompose",
    response={202: Accepted, 403: Error, 404: Error, 409: EditError, 422: EditError},
    summary="Ask the planner to break a step into a sub-plan; it arrives as a new revision, like a replan",
)
def decompose_step(request, plan_id: int, key: str, payload: DecomposeIn):
    get_plan_for_user(request.user, plan_id, need="edit_steps")
    try:
        plan = services.step_decompose_request(plan_id=plan_id, actor=request.user, revision=payload.revision, key=key)
    except ServiceError as error:
        return error_response(error)
    detail = f"The planner is decomposing {key}; its sub-plan arrives as revision {plan.revision + 1}, which needs approval."
    return Status(202, {"plan_id": plan.pk, "revision": plan.revision, "detail": detail})


def _plan_decision(request, plan_id: int, payload: DecisionIn, decision: str):
    get_plan_for_user(request.user, plan_id, need="approve")
    try:
        review.plan_decision_record(
            plan_id=plan_id,
            actor=request.user,
            revision=payload.revision,
            content_hash=payload.content_hash,
            decision=decision,
            comment=payload.comment,
        )
    except ServiceError as error:
        return error_response(error)
    return plan_out(Plan.objects.select_related("goal", "goal__requester").get(pk=plan_id))


@router.post("/plans/{plan_id}/approve", response=EDIT_RESPONSES, summary="Countersign the plan at this revision")
def approve_plan(request, plan_id: int, payload: DecisionIn):
    return _plan_decision(request, plan_id, payload, "approved")


@router.post("/plans/{plan_id}/reject", response=EDIT_RESPONSES, summary="Reject the plan at this revision (comment required)")
def reject_plan(request, plan_id: int, payload: DecisionIn):
    return _plan_decision(request, plan_id, payload, "rejected")


@router.post("/plans/{plan_id}/request-changes", response=EDIT_RESPONSES, summary="Ask the operator for changes (comment required)")
def request_changes(request, plan_id: int, payload: DecisionIn):
    return _plan_decision(request, plan_id, payload, "changes_requested")


@router.post("/plans/{plan_id}/resubmit", response=EDIT_RESPONSES, summary="Send a plan whose changes were requested back for approval")
def resubmit_plan(request, plan_id: int):
    get_plan_for_user(request.user, plan_id, need="edit")
    try:
        review.plan_resubmit(plan_id=plan_id, actor=request.user)
    except ServiceError as error:
        return error_response(error)
    return plan_out(Plan.objects.select_related("goal", "goal__requester").get(pk=plan_id))


class BudgetIn(Schema):
    usd: float | None = Field(default=None, gt=0, le=1_000_000)
    tokens: int | None = Field(default=None, gt=0, le=2_000_000_000)
    reason: str = Field(min_length=1, max_length=500)


@router.post("/plans/{plan_id}/budget", response=EDIT_RESPONSES, summary="Raise the plan's LLM budget (approvers; audited)")
def raise_budget(request, plan_id: int, payload: BudgetIn):
    get_plan_for_user(request.user, plan_id, need="approve")
    try:
        services.plan_budget_raise(plan_id=plan_id, actor=request.user, usd=payload.usd, tokens=payload.tokens, reason=payload.reason)
    except ServiceError as error:
        return error_response(error)
    return plan_out(Plan.objects.select_related("goal", "goal__requester").get(pk=plan_id))
