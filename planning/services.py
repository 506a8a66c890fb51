"""Writes for goals and plans. Every state change records its audit event in the same transaction."""

import logging
from collections.abc import Callable
from decimal import Decimal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from approvals import audit
from approvals.services import plan_approvals_void
from core import jobs, llm
from core.errors import ServiceError
from core.text import refuse_control_characters
from planning import alternatives, broadcast, decompose, dry_runs, planner, preflight, usage
from planning.code_planner import draft_code_plan
from planning.models import EDITABLE_STATUSES, Goal, Plan, PlanRevision, Playbook, Step, content_hash_of, plan_content
from planning.permissions import may_edit_steps
from planning.provenance import CONDITION
from planning.validation import PlanInvalid, PlanIssue, validate_plan

log = logging.getLogger(__name__)

MAX_GOAL_CHARS = 4000
SAVEABLE_STATUSES = {Plan.Status.APPROVED, Plan.Status.RUNNING, Plan.Status.SUCCEEDED, Plan.Status.FAILED}


class StaleRevision(ServiceError):
    status = 409

    def __init__(self, current: int):
        super().__init__(
            f"This plan changed since you loaded it: revision {current} is current. Reload to see it; your change was not applied."
        )
        self.current = current


class InvalidEdit(ServiceError):
    status = 422

    def __init__(self, issues: list[PlanIssue]):
        super().__init__("; ".join(str(issue) for issue in issues))
        self.issues = issues


def _queue_planning(plan_id: int) -> None:
    jobs.enqueue("planning.tasks.plan_generate_task", plan_id)


def goal_submit(*, requester, text: str, mode: str = Goal.Mode.STEPS, planner_choice: str = "", alternatives: int = 1) -> Plan:
    text = (text or "").strip()
    if not text:
        raise ServiceError("Describe the goal in a sentence or two.", status=422)
    if len(text) > MAX_GOAL_CHARS:
        raise ServiceError(f"A goal can be at most {MAX_GOAL_CHARS} characters.", status=422)
    refuse_control_characters(text, field="goal")
    if mode not in Goal.Mode.values:
        raise ServiceError("Mode must be steps or code.", status=422)
    if mode == Goal.Mode.CODE and not llm.is_configured():
        raise ServiceError("Code plans are written by an LLM, and none is configured on this server; submit a step plan.", status=422)
    if planner_choice not in {"", Plan.Planner.LLM, Plan.Planner.PLAYBOOK}:
        raise ServiceError("Planner must be llm, playbook, or automatic.", status=422)
    if planner_choice == Plan.Planner.LLM and not llm.is_configured():
        raise ServiceError("No LLM is configured on this server; choose the playbook planner.", status=422)
    _check_alternatives(alternatives, mode)
    with transaction.atomic():
        goal = Goal.objects.create(text=text, mode=mode, requester=requester)
        plan = Plan.objects.create(goal=goal, requested_planner=planner_choice, alternatives_requested=alternatives)
        audit.record(
            action="goal.submitted",
            actor=requester,
            plan_id=plan.pk,
            data={"goal_id": goal.pk, "text": text, "planner": planner_choice or "auto", "alternatives": alternatives},
        )
        broadcast.announce(plan.pk)
        _queue_planning(plan.pk)
    return plan


def plan_generate(*, plan_id: int) -> Plan:
    """Draft the plan for a goal. Safe to run twice: only a plan still in `planning` is filled in."""
    plan = Plan.objects.select_related("goal").get(pk=plan_id)
    if plan.status != Plan.Status.PLANNING:
        return plan
    if plan.alternatives_requested > 1:
        return _alternatives_generate(plan)
    try:
        with usage.metered(plan.pk):
            if plan.goal.mode == Goal.Mode.CODE:
                draft = draft_code_plan(plan.goal.text)
            else:
                draft = planner.draft_plan(plan.goal.text, planner=plan.requested_planner or None)
    except planner.PlanningFailed as failure:
        return _planning_failed(plan_id, str(failure))
    with transaction.atomic():
        plan = Plan.objects.select_for_update().get(pk=plan_id)
        if plan.status != Plan.Status.PLANNING:
            return plan
        plan.failure_reason = ""
        proposed = _store_draft(plan, draft, reason=f"Proposed by {draft.source}")
        audit.record(action="plan.proposed", plan_id=plan.pk, data={**proposed, "mode": plan.goal.mode})
        _after_revision(plan)
    return plan


def _store_draft(plan: Plan, draft: planner.Draft, *, reason: str) -> dict:
    """A draft's planner facts onto the plan and its steps as the next revision (the caller holds the
    plan's lock); returns what the plan.proposed audit event says of it."""
    plan.planner, plan.planner_source, plan.model = draft.planner, draft.source, draft.model
    plan.tokens_in, plan.tokens_out, plan.latency_ms = draft.tokens_in, draft.tokens_out, draft.latency_ms
    plan.output_mode = draft.output_mode
    write_revision(plan, draft.steps, author=None, planner=draft.planner, reason=reason)
    return {
        "planner": draft.planner,
        "source": draft.source,
        "model": draft.model,
        "tokens_in": draft.tokens_in,
        "tokens_out": draft.tokens_out,
        "latency_ms": draft.latency_ms,
        "repairs": draft.repairs,
        "output_mode": draft.output_mode,
        "revision": plan.revision,
        "content_hash": plan.content_hash,
        "steps": len(draft.steps),
    }


def _after_revision(plan: Plan) -> None:
    """Every new revision of a code plan gets a fresh dry run, which is what approvers look at."""
    if plan.goal.mode == Goal.Mode.CODE:
        dry_runs.queue_dry_run(plan.pk)


def _planning_failed(plan_id: int, reason: str) -> Plan:
    with transaction.atomic():
        plan = Plan.objects.select_for_update().get(pk=plan_id)
        if plan.status == Plan.Status.PLANNING:
            plan.status = Plan.Status.PLANNING_FAILED
            plan.failure_reason = reason
            plan.save(update_fields=["status", "failure_reason", "updated_at"])
            audit.record(action="plan.planning_failed", plan_id=plan.pk, data={"reason": reason})
            broadcast.announce(plan.pk, log="Planning failed.")
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
        broadcast.announce(plan.pk)
        _queue_planning(plan.pk)
    return plan


def plan_retry_with_goal(*, plan: Plan, actor, text: str) -> Plan:
    """'Edit goal and plan again' after a planning failure: the goal's new text, then a fresh draft."""
    text = (text or "").strip()
    if not text or len(text) > MAX_GOAL_CHARS:
        raise ServiceError(f"Describe the goal in at most {MAX_GOAL_CHARS} characters.", status=422)
    refuse_control_characters(text, field="goal")
    with transaction.atomic():
        locked = Plan.objects.select_for_update().select_related("goal").get(pk=plan.pk)
        if locked.status != Plan.Status.PLANNING_FAILED:
            raise ServiceError("Only a plan whose planning failed can be planned again.", status=409)
        siblings = locked.goal.plans.exclude(pk=locked.pk).exclude(status__in=[Plan.Status.PLANNING_FAILED, Plan.Status.SUPERSEDED])
        if siblings.exists():
            # Other drafts of this goal were written for its current text; changing it under them would put
            # steps up for approval beside a goal they were not drafted for.
            raise ServiceError("Other plans of this goal were drafted for its current text; plan again without changing it.", status=409)
        before = locked.goal.text
        Goal.objects.filter(pk=locked.goal_id).update(text=text)
        audit.record(action="goal.edited", actor=actor, plan_id=locked.pk, data={"before": before, "text": text})
    return plan_retry(plan=locked, actor=actor)


def plan_start_empty(*, plan: Plan, actor) -> Plan:
    """'Start from an empty plan' after a planning failure: a revision with no steps, written by hand."""
    with transaction.atomic():
        locked = Plan.objects.select_for_update().select_related("goal").get(pk=plan.pk)
        if locked.status != Plan.Status.PLANNING_FAILED:
            raise ServiceError("Only a plan whose planning failed can start empty.", status=409)
        locked.planner, locked.planner_source, locked.failure_reason = Plan.Planner.HUMAN, "", ""
        write_revision(locked, [], author=actor, planner=Plan.Planner.HUMAN, reason="Started from an empty plan")
        audit.record(action="plan.started_empty", actor=actor, plan_id=locked.pk, data={"revision": locked.revision})
    return locked


# ---- LLM budget -----------------------------------------------------------------------------------


def _budget_fields(*, usd, tokens) -> dict:
    if usd is None and tokens is None:
        raise ServiceError("Give a budget in tokens, in USD, or both.", status=422)
    if (usd is not None and usd <= 0) or (tokens is not None and tokens <= 0):
        raise ServiceError("A budget must be more than zero.", status=422)
    fields = {"budget_usd": Decimal(str(usd)).quantize(Decimal("0.0001")) if usd is not None else None, "budget_tokens": tokens}
    return {name: value for name, value in fields.items() if value is not None}


def goal_submit_within_budget(*, budget_usd: float | None = None, budget_tokens: int | None = None, **goal) -> Plan:
    """goal_submit, with the plan's own LLM budget. One transaction: the planning task is queued when it
    commits, so the planner never runs before the budget is in place."""
    if budget_usd is None and budget_tokens is None:
        return goal_submit(**goal)
    fields = _budget_fields(usd=budget_usd, tokens=budget_tokens)
    with transaction.atomic():
        plan = goal_submit(**goal)
        Plan.objects.filter(pk=plan.pk).update(**fields)
        audit.record(action="plan.budget_set", actor=goal["requester"], plan_id=plan.pk, data=_budget_data(fields))
    plan.refresh_from_db()
    return plan


def plan_budget_raise(*, plan_id: int, actor, usd: float | None = None, tokens: int | None = None, reason: str) -> Plan:
    """An approver sets a plan's LLM budget; only upwards, and with a reason, as it allows more spend."""
    reason = (reason or "").strip()
    if not reason:
        raise ServiceError("Say why the budget is raised.", status=422)
    fields = _budget_fields(usd=usd, tokens=tokens)
    with transaction.atomic():
        plan = Plan.objects.select_for_update().get(pk=plan_id)
        before = usage.budget_of(plan)
        for name, value in fields.items():
            current = before.usd if name == "budget_usd" else before.tokens
            if current is not None and value < current:
                raise ServiceError(f"The budget can only be raised: it is {current} now.", status=422)
            setattr(plan, name, value)
        plan.save(update_fields=[*fields, "updated_at"])
        data = {**_budget_data(fields), "before": {"usd": _number(before.usd), "tokens": before.tokens}, "reason": reason[:500]}
        audit.record(action="plan.budget_raised", actor=actor, plan_id=plan.pk, data=data)
    return plan


def _number(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def _budget_data(fields: dict) -> dict:
    return {"usd": _number(fields.get("budget_usd")), "tokens": fields.get("budget_tokens")}


def playbook_save_from_plan(*, plan: Plan, actor, name: str) -> Playbook:
    name = (name or "").strip()
    if not name:
        raise ServiceError("Give the playbook a name.", status=422)
    refuse_control_characters(name, field="playbook name")
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


# ---- editing -----------------------------------------------------------------------------------------

EDITABLE_FIELDS = ("title", "description", "tool", "args", "depends_on", "condition", "success_criteria")


def _carried_replan_sources(row: Step | None, content: dict) -> dict:
    """The marks of values a replan wrote that the new content keeps unchanged: an edit elsewhere in the
    plan must not launder a value a page may have chosen into a trusted literal."""
    if row is None:
        return {}
    args = content.get("args") or {}
    return {
        name: mark
        for name, mark in (row.replan_sources or {}).items()
        if (row.condition == content.get("condition", "") if name == CONDITION else name in args and row.args.get(name) == args[name])
    }


def _replace_steps(plan: Plan, steps: list[dict], replan_sources: dict[str, dict] | None = None) -> None:
    """Store the new step list. A step that already succeeded (before a replan) and is unchanged keeps
    its row, status and output, so it is not run again; every other step starts fresh, keeping the marks
    of replan-written values it still holds, plus those of `replan_sources` (step key -> marks)."""
    existing = {step.key: step for step in plan.steps.all()}
    keep = []
    for index, content in enumerate(steps):
        row = existing.get(content["key"])
        if row is not None and row.status == Step.Status.SUCCEEDED and row.content() == content:
            row.position = index
            keep.append(row)
    plan.steps.exclude(pk__in=[row.pk for row in keep]).delete()
    Step.objects.bulk_update(keep, ["position"])
    kept_keys = {row.key for row in keep}
    Step.objects.bulk_create(
        [
            Step(
                plan=plan,
                position=index,
                replan_sources=_carried_replan_sources(existing.get(step["key"]), step) | (replan_sources or {}).get(step["key"], {}),
                **step,
            )
            for index, step in enumerate(steps)
            if step["key"] not in kept_keys
        ]
    )


def write_revision(
    plan: Plan, steps: list[dict], *, author, planner: str, reason: str, replan_sources: dict[str, dict] | None = None
) -> int:
    """Store validated steps as the plan's next revision; void approvals; back to awaiting approval.
    `replan_sources` marks values a replan wrote after reading untrusted facts (planning/provenance.py).
    The caller holds the plan's row lock and records the audit event. Returns the voided approvals."""
    new_hash = content_hash_of(steps)
    _replace_steps(plan, steps, replan_sources)
    plan.revision += 1
    plan.content_hash = new_hash
    # A code plan's check is its dry run; preflight reads step plans.
    plan.preflight = [] if dry_runs.is_code_plan(plan) else preflight.findings_for(plan.steps.all())
    if not dry_runs.is_code_plan(plan) and settings.COUNTERSIGN_PREFLIGHT_CRITIC and llm.is_configured():
        jobs.enqueue("planning.tasks.preflight_critic_task", plan.pk, plan.revision)
    voided = plan_approvals_void(plan_id=plan.pk, reason=f"superseded by revision {plan.revision}")
    plan.status = Plan.Status.AWAITING_APPROVAL
    plan.save()
    PlanRevision.objects.create(
        plan=plan,
        number=plan.revision,
        content=plan_content(steps),
        content_hash=new_hash,
        author=author,
        planner=planner,
        reason=reason[:300],
    )
    broadcast.announce(plan.pk, all_steps=True, log=f"Revision {plan.revision}: {reason[:300]}")
    return voided


def _edit_plan(
    *, plan_id: int, actor, revision: int, summary: str | Callable[[], str], change: Callable[[list[dict]], list[dict]], details: dict
) -> Plan:
    """Apply one edit atomically: check the revision (optimistic locking), validate the whole new plan,
    store a revision, void approvals, and record exactly one audit event. Nothing changes on any error."""
    with transaction.atomic():
        plan = _locked_for_edit(plan_id, actor, revision)
        proposed = change([dict(step) for step in plan_content(plan.steps.all())])
        summary = summary() if callable(summary) else summary
        try:
            steps = validate_plan({"steps": proposed})
        except PlanInvalid as invalid:
            raise InvalidEdit(invalid.issues) from invalid
        if content_hash_of(steps) == plan.content_hash:
            raise ServiceError("Nothing changed: the plan already says that.", status=422)
        voided = write_revision(plan, steps, author=actor, planner=Plan.Planner.HUMAN, reason=summary)
        audit.record(
            action="plan.edited",
            actor=actor,
            plan_id=plan.pk,
            step_key=details.get("step", ""),
            data={"revision": plan.revision, "content_hash": plan.content_hash, "change": summary, "voided_approvals": voided, **details},
        )
        _after_revision(plan)
    return plan


def _find(steps: list[dict], key: str) -> dict:
    for step in steps:
        if step["key"] == key:
            return step
    raise ServiceError(f"This plan has no step {key!r}.", status=404)


def step_update(*, plan_id: int, actor, revision: int, key: str, changes: dict) -> Plan:
    unknown = set(changes) - set(EDITABLE_FIELDS)
    if unknown:
        raise InvalidEdit([PlanIssue(key, field, "this field cannot be edited") for field in sorted(unknown)])

    changed: list[str] = []

    def change(steps):
        step = _find(steps, key)
        # A form sends every field; the revision names only those whose value differs.
        changed.extend(sorted(name for name, value in changes.items() if step.get(name, "") != value))
        step.update(changes)
        if "tool" in changes and "risk" in step:
            del step["risk"]
        return steps

    return _edit_plan(
        plan_id=plan_id,
        actor=actor,
        revision=revision,
        summary=lambda: f"Edited {key}: {', '.join(changed) or 'nothing'}",
        change=change,
        details={"step": key, "fields": changed},
    )


def _next_key(steps: list[dict]) -> str:
    numbers = [int(step["key"][1:]) for step in steps if step["key"][:1] == "s" and step["key"][1:].isdigit()]
    return f"s{max(numbers, default=0) + 1}"


def step_add(*, plan_id: int, actor, revision: int, step: dict) -> Plan:
    unknown = set(step) - set(EDITABLE_FIELDS) - {"key"}
    if unknown:
        raise InvalidEdit([PlanIssue(step.get("key"), field, "unknown step field") for field in sorted(unknown)])

    def change(steps):
        new = {"title": "", "tool": "", "args": {}, "depends_on": [], **step}
        new["key"] = step.get("key") or _next_key(steps)
        return steps + [new]

    return _edit_plan(plan_id=plan_id, actor=actor, revision=revision, summary="Added a step", change=change, details={"added": True})


def step_delete(*, plan_id: int, actor, revision: int, key: str) -> Plan:
    def change(steps):
        _find(steps, key)
        dependents = [step["key"] for step in steps if key in step.get("depends_on", [])]
        if dependents:
            raise InvalidEdit([PlanIssue(key, "depends_on", f"{', '.join(dependents)} depend on {key}; remove that dependency first")])
        return [step for step in steps if step["key"] != key]

    return _edit_plan(
        plan_id=plan_id, actor=actor, revision=revision, summary=f"Deleted {key}", change=change, details={"step": key, "deleted": True}
    )


def step_move(*, plan_id: int, actor, revision: int, key: str, direction: str) -> Plan:
    if direction not in {"up", "down"}:
        raise ServiceError("Move a step up or down.", status=422)

    def change(steps):
        index = steps.index(_find(steps, key))
        target = index - 1 if direction == "up" else index + 1
        if not 0 <= target < len(steps):
            raise ServiceError(f"{key} is already the {'first' if direction == 'up' else 'last'} step.", status=422)
        steps[index], steps[target] = steps[target], steps[index]
        return steps

    return _edit_plan(
        plan_id=plan_id,
        actor=actor,
        revision=revision,
        summary=f"Moved {key} {direction}",
        change=change,
        details={"step": key, "moved": direction},
    )


# ---- alternatives ---------------------------------------------------------------------------------


def _check_alternatives(count: int, mode: str) -> None:
    if not isinstance(count, int) or not 1 <= count <= planner.MAX_ALTERNATIVES:
        raise ServiceError(f"Ask for between 1 and {planner.MAX_ALTERNATIVES} alternatives.", status=422)
    if count > 1 and mode == Goal.Mode.CODE:
        raise ServiceError("Alternatives are drafted for step plans; a code plan has one draft.", status=422)


def _alternatives_generate(plan: Plan) -> Plan:
    """Draft the goal's alternatives: the first into this plan's row, the others into new plans of the
    same goal, each validated, preflighted, estimated and scored, and none approvable until chosen."""
    try:
        with usage.metered(plan.pk):
            known = _open_alternatives(plan)
            found = planner.draft_alternatives(
                plan.goal.text, plan.alternatives_requested, planner=plan.requested_planner or None, known=known
            )
    except planner.PlanningFailed as failure:
        return _planning_failed(plan.pk, str(failure))
    if not found.drafts:
        dropped = "; ".join(found.dropped)
        return _planning_failed(
            plan.pk, "No draft differed from the alternatives already on the table" + (f": {dropped}" if dropped else ".")
        )
    with transaction.atomic():
        first = Plan.objects.select_for_update().select_related("goal").get(pk=plan.pk)
        if first.status != Plan.Status.PLANNING:
            return first
        rows = [first] + [
            Plan.objects.create(
                goal=first.goal,
                requested_planner=first.requested_planner,
                alternatives_requested=first.alternatives_requested,
                # Each alternative keeps the budget the goal was given: drafting again is not a way around it.
                budget_usd=first.budget_usd,
                budget_tokens=first.budget_tokens,
            )
            for _ in found.drafts[1:]
        ]
        proposed = [
            _write_alternative(row, draft, alone=len(found.drafts) == 1 and not known)
            for row, draft in zip(rows, found.drafts, strict=True)
        ]
        audit.record(
            action="plan.alternatives_proposed",
            plan_id=first.pk,
            data={"goal_id": first.goal_id, "requested": first.alternatives_requested, "alternatives": proposed, "dropped": found.dropped},
        )
    first.refresh_from_db()
    return first


def _open_alternatives(plan: Plan) -> list[list[dict]]:
    """The goal's drafts still waiting to be chosen: new alternatives must differ from them too."""
    others = plan.goal.plans.filter(status=Plan.Status.ALTERNATIVE).exclude(pk=plan.pk).prefetch_related("steps")
    return [plan_content(other.steps.all()) for other in others]


def _write_alternative(plan: Plan, draft: planner.Draft, *, alone: bool) -> dict:
    proposed = _store_draft(plan, draft, reason=f"Alternative proposed by {draft.source}")
    plan.alternative_score, plan.alternative_reason = alternatives.score_of(plan, plan.steps.all())
    # A single distinct draft is no choice: it goes straight to review.
    plan.status = Plan.Status.AWAITING_APPROVAL if alone else Plan.Status.ALTERNATIVE
    plan.save()
    summary = {"plan_id": plan.pk, "score": plan.alternative_score, "reason": plan.alternative_reason, "content_hash": plan.content_hash}
    audit.record(action="plan.proposed", plan_id=plan.pk, data={**proposed, **summary, "alternative": True})
    broadcast.announce(plan.pk, all_steps=True)
    return {**summary, "source": draft.source}


def alternatives_request(*, plan_id: int, actor, count: int) -> Plan:
    """'Draft alternatives' on a goal's plan: this draft joins the comparison (scored, no longer
    approvable until chosen) and a new plan drafts `count` more."""
    _check_alternatives(count, Goal.Mode.STEPS)
    if count < 2:
        raise ServiceError("Ask for at least 2 alternatives.", status=422)
    with transaction.atomic():
        plan = Plan.objects.select_for_update().select_related("goal").get(pk=plan_id)
        if plan.goal.mode != Goal.Mode.STEPS:
            raise ServiceError("Alternatives are drafted for step plans; a code plan has one draft.", status=422)
        _refuse_while_busy(plan.goal)
        if plan.status not in CHOOSABLE_AWAY or plan.status == Plan.Status.REJECTED:
            # A rejected plan goes back to review only as a new revision (an edit), never unchanged by
            # being chosen again.
            raise ServiceError(f"A plan that is {plan.get_status_display().lower()} cannot get alternatives.", status=409)
        if plan.replan_count or plan.steps.filter(status=Step.Status.SUCCEEDED).exists():
            # A fresh draft from the goal alone would plan again what already ran (a purchase, an email).
            raise ServiceError("Steps of this plan already ran; alternatives would repeat them. Edit or replan it instead.", status=409)
        if plan.revision and plan.status != Plan.Status.ALTERNATIVE:
            voided = plan_approvals_void(plan_id=plan.pk, reason="the plan became one of several alternatives")
            plan.alternative_score, plan.alternative_reason = alternatives.score_of(plan, plan.steps.all())
            plan.status = Plan.Status.ALTERNATIVE
            plan.save()
            audit.record(
                action="plan.became_alternative",
                actor=actor,
                plan_id=plan.pk,
                data={"score": plan.alternative_score, "voided_approvals": voided},
            )
            broadcast.announce(plan.pk, all_steps=True)
        drafting = Plan.objects.create(
            goal=plan.goal,
            requested_planner=plan.requested_planner,
            alternatives_requested=count,
            budget_usd=plan.budget_usd,
            budget_tokens=plan.budget_tokens,
        )
        audit.record(
            action="plan.alternatives_requested",
            actor=actor,
            plan_id=drafting.pk,
            data={"goal_id": plan.goal_id, "from_plan": plan.pk, "count": count},
        )
        broadcast.announce(drafting.pk)
        _queue_planning(drafting.pk)
    return drafting


# Drafts nobody ran: choosing an alternative supersedes them. A running or finished plan stays as it is.
CHOOSABLE_AWAY = {Plan.Status.ALTERNATIVE, Plan.Status.PLANNING_FAILED} | EDITABLE_STATUSES


def _refuse_while_busy(goal: Goal) -> None:
    busy = goal.plans.filter(status__in=[Plan.Status.PLANNING, Plan.Status.RUNNING]).first()
    if busy is not None:
        raise ServiceError(f"Plan {busy.pk} of this goal is {busy.get_status_display().lower()}; wait until it is done.", status=409)


def alternative_choose(*, goal_id: int, plan_id: int, actor) -> Plan:
    """Make one alternative the goal's plan, to be reviewed and approved as usual; the goal's other
    unrun drafts become superseded, keeping their score and reason for history."""
    with transaction.atomic():
        plans = list(Plan.objects.select_for_update().filter(goal_id=goal_id).order_by("id"))
        chosen = next((plan for plan in plans if plan.pk == plan_id), None)
        if chosen is None:
            raise ServiceError(f"Goal {goal_id} has no plan {plan_id}.", status=404)
        if chosen.status != Plan.Status.ALTERNATIVE:
            raise ServiceError(
                f"Plan {plan_id} is {chosen.get_status_display().lower()}, not an alternative waiting to be chosen.", status=409
            )
        _refuse_while_busy(chosen.goal)
        superseded = []
        for other in plans:
            if other.pk == chosen.pk or other.status not in CHOOSABLE_AWAY:
                continue
            plan_approvals_void(plan_id=other.pk, reason=f"alternative {chosen.pk} was chosen")
            other.status = Plan.Status.SUPERSEDED
            other.alternative_reason = (other.alternative_reason or "not drafted as an alternative")[:260] + f"; plan {chosen.pk} chosen"
            other.save(update_fields=["status", "alternative_reason", "updated_at"])
            audit.record(
                action="plan.superseded",
                actor=actor,
                plan_id=other.pk,
                data={"chosen": chosen.pk, "score": other.alternative_score, "reason": other.alternative_reason},
            )
            broadcast.announce(other.pk, all_steps=True)
            superseded.append({"plan_id": other.pk, "score": other.alternative_score, "reason": other.alternative_reason})
        chosen.status = Plan.Status.AWAITING_APPROVAL
        # Choosing decides what goes to review, as an edit would: the chooser may not countersign it too.
        chosen.chosen_by = actor
        chosen.save(update_fields=["status", "chosen_by", "updated_at"])
        audit.record(
            action="plan.alternative_chosen",
            actor=actor,
            plan_id=chosen.pk,
            data={
                "goal_id": goal_id,
                "score": chosen.alternative_score,
                "reason": chosen.alternative_reason,
                "content_hash": chosen.content_hash,
                "superseded": superseded,
            },
        )
        broadcast.announce(chosen.pk, all_steps=True, log="Chosen among the alternatives; it awaits approval.")
    return chosen


# ---- decomposing a step -----------------------------------------------------------------------------


def step_decompose_request(*, plan_id: int, actor, revision: int, key: str) -> Plan:
    """'Decompose' on a step: checked now (who, which revision, which step), drafted by the planner in
    the background; the sub-plan arrives as a new revision, like a replan."""
    if not llm.is_configured():
        raise ServiceError("Decomposing a step asks the LLM planner, and none is configured on this server.", status=422)
    with transaction.atomic():
        plan = _locked_for_edit(plan_id, actor, revision)
        if dry_runs.is_code_plan(plan):
            raise ServiceError("A code plan has one step of code; edit the code instead.", status=422)
        _find(plan_content(plan.steps.all()), key)
        if plan.steps.filter(key=key, status=Step.Status.SUCCEEDED).exists():
            raise ServiceError(f"{key} already ran and its output is kept; decompose a step still to run.", status=409)
        audit.record(action="plan.decompose_requested", actor=actor, plan_id=plan.pk, step_key=key, data={"revision": revision})
        broadcast.announce(plan.pk, log=f"Decomposing {key}: the planner is drafting its sub-plan.")
        jobs.enqueue("planning.tasks.step_decompose_task", plan.pk, key, revision, actor.pk)
    return plan


def _locked_for_edit(plan_id: int, actor, revision: int) -> Plan:
    """The plan, locked, if `actor` may still edit it at `revision`; the caller is inside a transaction."""
    plan = Plan.objects.select_for_update().select_related("goal").get(pk=plan_id)
    if not plan.is_editable:
        raise ServiceError(f"A plan that is {plan.get_status_display().lower()} cannot be edited.", status=409)
    # Checked again under the lock: an approver's edit is refused once the plan has left review.
    refusal = may_edit_steps(actor, plan)
    if refusal:
        raise ServiceError(refusal, status=403)
    if revision != plan.revision:
        raise StaleRevision(plan.revision)
    return plan


def step_decompose_perform(*, plan_id: int, key: str, revision: int, actor_id: int) -> Plan:
    """Draft the sub-plan and store it as the next revision, if the plan is still at `revision`. Any
    failure leaves the plan as it was and says why in the audit trail and the plan's activity."""
    plan = Plan.objects.select_related("goal").get(pk=plan_id)
    actor = get_user_model().objects.get(pk=actor_id)
    steps = [dict(step) for step in plan_content(plan.steps.all())]
    if plan.revision != revision or not any(step["key"] == key for step in steps):
        return _decompose_failed(plan, actor, key, f"the plan moved on to revision {plan.revision} before the sub-plan was drafted")
    target = next(step for step in steps if step["key"] == key)
    spliced: list[decompose.Splice] = []

    def assemble(answer):
        spliced[:] = [decompose.splice(steps, key, answer)]
        return {"steps": spliced[0].steps}

    inputs = [step for step in steps if step["key"] in target.get("depends_on", [])]
    try:
        with usage.metered(plan.pk):
            draft = planner.draft_decomposition(plan.goal.text, step=target, inputs=inputs, assemble=assemble)
    except planner.PlanningFailed as failure:
        return _decompose_failed(plan, actor, key, str(failure))
    except (RecursionError, TypeError, KeyError, AttributeError) as error:
        # Model output shaped in a way the splice did not foresee: refused and said, never a stuck request.
        log.warning("Decomposing %s of plan %s failed on the planner's answer: %r", key, plan_id, error)
        return _decompose_failed(plan, actor, key, f"the planner's answer could not be used as a sub-plan ({type(error).__name__})")
    splice = spliced[0]
    try:
        with transaction.atomic():
            plan = _locked_for_edit(plan_id, actor, revision)
            summary = f"Decomposed {key} into {', '.join(splice.new_keys)}" + (
                f"; check: {'; '.join(splice.flagged)}" if splice.flagged else ""
            )
            voided = write_revision(plan, draft.steps, author=actor, planner=Plan.Planner.DECOMPOSE, reason=summary)
            audit.record(
                action="plan.decomposed",
                actor=actor,
                plan_id=plan.pk,
                step_key=key,
                data={
                    "revision": plan.revision,
                    "content_hash": plan.content_hash,
                    "sub_steps": splice.new_keys,
                    "last_steps": splice.last_keys,
                    "rewired": splice.rewired,
                    "flagged": splice.flagged,
                    "voided_approvals": voided,
                    "model": draft.model,
                    "tokens_in": draft.tokens_in,
                    "tokens_out": draft.tokens_out,
                },
            )
    except ServiceError as refused:
        return _decompose_failed(plan, actor, key, refused.message)
    return plan


def _decompose_failed(plan: Plan, actor, key: str, reason: str) -> Plan:
    with transaction.atomic():
        audit.record(action="plan.decompose_failed", actor=actor, plan_id=plan.pk, step_key=key, data={"reason": reason[:500]})
        broadcast.announce(plan.pk, log=f"Decomposing {key} failed: {reason[:300]}")
    return plan
