"""What happens after a run ends: a replan proposal when a step failed for good, and the final answer."""

import json
import logging

from django.conf import settings
from django.db import transaction

from approvals import audit
from core import llm
from execution.failpoints import failpoint
from planning import broadcast, ledger, planner, usage
from planning.diff import diff_contents
from planning.models import FINISHED_STATUSES, Plan, Step, plan_content
from planning.provenance import replan_marks
from planning.services import write_revision
from planning.validation import PlanInvalid, validate_plan

log = logging.getLogger(__name__)


def _retry_proposal(remaining: list[Step]) -> list[dict]:
    return [{k: v for k, v in step.content().items() if k != "risk"} for step in remaining]


def _untrusted_literals(new_steps: list[dict], before: list[dict], *, replan: int, facts: list[str]) -> dict[str, dict]:
    """{step key: marks} for a replan written while untrusted facts were in its prompt: the values it wrote
    rather than carried over from the revision that ran may come from a page's text, so a MEDIUM or HIGH
    step holding one, or reading the output of a step that does, is gated as if a template read the page
    (planning/provenance.py)."""
    if not facts:
        return {}
    previous = {step["key"]: step for step in before}
    marked = {}
    for step in new_steps:
        if marks := replan_marks(step, previous.get(step["key"]), replan=replan, facts=facts):
            marked[step["key"]] = marks
    return marked


def replan(plan_id: int) -> Plan:
    """Propose a new revision for the work that is left, keeping completed steps and their outputs.
    It needs approval again before it runs."""
    plan = Plan.objects.select_related("goal").get(pk=plan_id)
    if plan.status != Plan.Status.FAILED or plan.replan_count >= settings.COUNTERSIGN_MAX_REPLANS:
        return plan
    steps = list(plan.steps.all())
    kept = [s for s in steps if s.status == Step.Status.SUCCEEDED]
    remaining = [s for s in steps if s.status != Step.Status.SUCCEEDED]
    failures = [{"key": s.key, "tool": s.tool, "error": s.error} for s in steps if s.status == Step.Status.FAILED]
    source, draft, untrusted_facts = "retry of the remaining steps", None, []
    facts = ledger.ledger_complete(plan.pk)
    if llm.is_configured():
        try:
            with usage.metered(plan.pk):
                untrusted_facts = ledger.untrusted_fact_keys(facts)
                draft = planner.draft_replan(
                    plan.goal.text,
                    kept=plan_content(kept),
                    facts=ledger.ledger_payload(facts),
                    failures=failures,
                    remaining=plan_content(remaining),
                )
            source = f"replan by {draft.model}"
        except planner.PlanningFailed as failure:
            source = f"retry of the remaining steps (the LLM replan failed: {failure})"
    try:
        new_steps = draft.steps if draft else validate_plan({"steps": plan_content(kept) + _retry_proposal(remaining)})
    except PlanInvalid as invalid:
        # No replan can be proposed, so the run ends with its answer (the reconciler would otherwise
        # ask for this replan again and again).
        log.warning("Replan of plan %s is invalid: %s", plan_id, invalid)
        return compose_answer(plan_id)
    with transaction.atomic():
        plan = Plan.objects.select_for_update().get(pk=plan_id)
        if plan.status != Plan.Status.FAILED:
            return plan
        before = plan_content(plan.steps.all())
        plan.replan_count += 1
        # Only an LLM's draft read the facts; a retry of the remaining steps copies the revision that ran.
        read_untrusted = untrusted_facts if draft else []
        marked = _untrusted_literals(new_steps, before, replan=plan.replan_count, facts=read_untrusted)
        voided = write_revision(
            plan,
            new_steps,
            author=None,
            planner=Plan.Planner.REPLAN,
            reason=f"Replan {plan.replan_count}: {source}"[:300],
            replan_sources=marked,
        )
        plan.planner_source = source[:200]
        if draft:
            plan.tokens_in += draft.tokens_in
            plan.tokens_out += draft.tokens_out
            plan.output_mode = draft.output_mode
        plan.save(update_fields=["planner_source", "tokens_in", "tokens_out", "output_mode", "replan_count", "updated_at"])
        changes = diff_contents(before, plan_content(new_steps))
        audit.record(
            action="plan.replan_proposed",
            plan_id=plan.pk,
            data={
                "revision": plan.revision,
                "content_hash": plan.content_hash,
                "source": source,
                "failures": failures,
                "changes": len(changes),
                "voided_approvals": voided,
                "untrusted_facts": read_untrusted,
                "untrusted_literals": {key: sorted(marks) for key, marks in marked.items()},
            },
        )
        broadcast.announce(plan.pk, all_steps=True, log=f"Replan proposed as revision {plan.revision}; it needs approval before it runs.")
        failpoint("during_replan")
    return plan


def _summary(steps: list[Step]) -> str:
    lines = []
    for step in steps:
        if step.status == Step.Status.SUCCEEDED:
            output = step.output if isinstance(step.output, str) else json.dumps(step.output, ensure_ascii=False, default=str)
            lines.append(f"{step.key} {step.title}: {output[:300]}")
        else:
            lines.append(
                f"{step.key} {step.title}: {step.get_status_display().lower()}"
                + (f" ({step.note or step.error})" if step.note or step.error else "")
            )
    return "\n".join(lines)


def compose_answer(plan_id: int) -> Plan:
    plan = Plan.objects.select_related("goal").get(pk=plan_id)
    if plan.status not in FINISHED_STATUSES or plan.answer_text:
        return plan
    facts = ledger.ledger_complete(plan.pk)
    summary = ledger.ledger_lines(facts) or _summary(list(plan.steps.all()))
    answer, source = f"Plan {plan.get_status_display().lower()}.\n{summary}", "summary"
    if llm.is_configured():
        prompt = (
            f"Goal: {plan.goal.text}\nThe plan {plan.status}. Facts ledger, one fact per finished step. {ledger.FACTS_ARE_DATA}\n"
            f"<facts>\n{ledger.facts_fenced(ledger.ledger_payload(facts)) if facts else summary}\n</facts>\n"
            "Answer the goal for the operator in one or two sentences, from these facts only. Cite the steps each claim "
            "relies on by their key in square brackets, e.g. [s1]. Plain text."
        )
        try:
            with usage.metered(plan.pk):
                answer, source = llm.generate_text(prompt, max_tokens=300, purpose="answer").strip() or answer, "llm"
        except llm.LLMError as error:
            log.warning("Answer for plan %s falls back to a summary: %s", plan_id, error)
    answer, cited = ledger.citations(answer, facts)
    with transaction.atomic():
        plan = Plan.objects.select_for_update().get(pk=plan_id)
        plan.answer_text = answer[:10_000]
        plan.save(update_fields=["answer_text", "updated_at"])
        data = {"source": source, "chars": len(plan.answer_text), "cites": cited, "facts": len(facts)}
        audit.record(action="plan.answered", plan_id=plan.pk, data=data)
        broadcast.announce(plan.pk, log="Answer written.")
        failpoint("during_answer")
    return plan
