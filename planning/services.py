"""Writes for goals and plans. Every state change records its audit event in the same transaction."""

from django.db import transaction

from approvals import audit
from planning import llm, planner
from planning.models import Goal, Plan, PlanRevision, Playbook, Step, content_hash_of, plan_content

MAX_GOAL_CHARS = 4000
SAVEABLE_STATUSES = {Plan.Status.APPROVED, Plan.Status.RUNNING, Plan.Status.SUCCEEDED, Plan.Status.FAILED}


class ServiceError(Exception):
    """A refused operation; `status` is the HTTP status the API answers with."""

    status = 400

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


def _queue_planning(plan_id: int) -> None:
    from planning.tasks import plan_generate_task

    transaction.on_commit(lambda: plan_generate_task.delay(plan_id))


def goal_submit(*, requester, text: str, mode: str = Goal.Mode.STEPS, planner_choice: str = "") -> Plan:
    text = (text or "").strip()
    if not text:
        raise ServiceError("Describe the goal in a sentence or two.", status=422)
    if len(text) > MAX_GOAL_CHARS:
        raise ServiceError(f"A goal can be at most {MAX_GOAL_CHARS} characters.", status=422)
    if mode != Goal.Mode.STEPS:
        raise ServiceError("Only step plans are available so far; code plans are not enabled on this server.", status=422)
    if planner_choice not in {"", Plan.Planner.LLM, Plan.Planner.PLAYBOOK}:
        raise ServiceError("Planner must be llm, playbook, or automatic.", status=422)
    if planner_choice == Plan.Planner.LLM and not llm.is_configured():
        raise ServiceError("No LLM is configured on this server; choose the playbook planner.", status=422)
    with transaction.atomic():
        goal = Goal.objects.create(text=text, mode=mode, requester=requester)
        plan = Plan.objects.create(goal=goal, requested_planner=planner_choice)
        audit.record(
            action="goal.submitted",
            actor=requester,
            plan_id=plan.pk,
            data={"goal_id": goal.pk, "text": text, "planner": planner_choice or "auto"},
        )
        _queue_planning(plan.pk)
    return plan


def plan_generate(*, plan_id: int) -> Plan:
    """Draft the plan for a goal. Safe to run twice: only a plan still in `planning` is filled in."""
    plan = Plan.objects.select_related("goal").get(pk=plan_id)
    if plan.status != Plan.Status.PLANNING:
        return plan
    try:
        draft = planner.draft_plan(plan.goal.text, planner=plan.requested_planner or None)
    except planner.PlanningFailed as failure:
        return _planning_failed(plan_id, str(failure))
    with transaction.atomic():
        plan = Plan.objects.select_for_update().get(pk=plan_id)
        if plan.status != Plan.Status.PLANNING:
            return plan
        plan.steps.all().delete()
        Step.objects.bulk_create([Step(plan=plan, position=index, **step) for index, step in enumerate(draft.steps)])
        plan.revision += 1
        plan.content_hash = content_hash_of(draft.steps)
        plan.status = Plan.Status.AWAITING_APPROVAL
        plan.planner, plan.planner_source, plan.model = draft.planner, draft.source, draft.model
        plan.tokens_in, plan.tokens_out, plan.latency_ms = draft.tokens_in, draft.tokens_out, draft.latency_ms
        plan.failure_reason = ""
        plan.save()
        PlanRevision.objects.create(
            plan=plan,
            number=plan.revision,
            content=plan_content(draft.steps),
            content_hash=plan.content_hash,
            planner=draft.planner,
            reason=f"Proposed by {draft.source}",
        )
        audit.record(
            action="plan.proposed",
            plan_id=plan.pk,
            data={
                "planner": draft.planner,
                "source": draft.source,
                "model": draft.model,
                "tokens_in": draft.tokens_in,
                "tokens_out": draft.tokens_out,
                "latency_ms": draft.latency_ms,
                "repairs": draft.repairs,
                "revision": plan.revision,
                "content_hash": plan.content_hash,
                "steps": len(draft.steps),
            },
        )
    return plan


def _planning_failed(plan_id: int, reason: str) -> Plan:
    with transaction.atomic():
        plan = Plan.objects.select_for_update().get(pk=plan_id)
        if plan.status == Plan.Status.PLANNING:
            plan.status = Plan.Status.PLANNING_FAILED
            plan.failure_reason = reason
            plan.save(update_fields=["status", "failure_reason", "updated_at"])
            audit.record(action="plan.planning_failed", plan_id=plan.pk, data={"reason": reason})
    return plan


def plan_retry(*, plan: Plan, actor, planner_choice: str | None = None) -> Plan:
    """'Plan again' after a planning failure."""
    with transaction.atomic():
        plan = Plan.objects.select_for_update().get(pk=plan.pk)
        if plan.status != Plan.Status.PLANNING_FAILED:
            raise ServiceError("Only a plan whose planning failed can be planned again.", status=409)
        if planner_choice is not None:
            if planner_choice == Plan.Planner.LLM and not llm.is_configured():
                raise ServiceError("No LLM is configured on this server; choose the playbook planner.", status=422)
            plan.requested_planner = planner_choice
        plan.status = Plan.Status.PLANNING
        plan.failure_reason = ""
        plan.save(update_fields=["status", "failure_reason", "requested_planner", "updated_at"])
        audit.record(action="plan.planning_requested", actor=actor, plan_id=plan.pk, data={"planner": plan.requested_planner or "auto"})
        _queue_planning(plan.pk)
    return plan


def playbook_save_from_plan(*, plan: Plan, actor, name: str) -> Playbook:
    name = (name or "").strip()
    if not name:
        raise ServiceError("Give the playbook a name.", status=422)
    if plan.status not in SAVEABLE_STATUSES:
        raise ServiceError("Only an approved plan can be saved as a playbook.", status=409)
    if Playbook.objects.filter(name=name).exists():
        raise ServiceError(f"A playbook named {name!r} already exists.", status=409)
    steps = [{k: v for k, v in step.items() if k != "risk"} for step in plan_content(plan.steps.all())]
    with transaction.atomic():
        playbook = Playbook.objects.create(
            name=name, goal_text=plan.goal.text, steps=steps, source=Playbook.Source.SAVED, created_by=actor, from_plan=plan
        )
        audit.record(action="playbook.saved", actor=actor, plan_id=plan.pk, data={"playbook": name, "content_hash": plan.content_hash})
    return playbook
