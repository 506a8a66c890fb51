"""Execution with a real Celery worker on Redis: ordering, parallelism, gates, faults and replanning."""

import os
import signal

import pytest

from approvals.models import AuditEvent
from core.errors import ServiceError
from execution import engine, gates, reconcile
from planning import services
from planning.models import Plan, Step, StepAttempt
from planning.review import plan_decision_record
from tests.conftest import make_user, wait_until
from tests.fixtures.plans import approved_plan, step
from tests.tools import effects

S = Step.Status


@pytest.fixture
def people(transactional_db):
    return make_user("alice", "operator"), make_user("bob", "approver")


def run(people, plan) -> Plan:
    return engine.plan_run(plan_id=plan.pk, actor=people[0])


def steps_of(plan) -> dict[str, Step]:
    return {s.key: s for s in Step.objects.filter(plan=plan)}


def finished(plan_id, *statuses):
    statuses = statuses or (Plan.Status.SUCCEEDED, Plan.Status.PARTIALLY_COMPLETED, Plan.Status.FAILED, Plan.Status.CANCELLED)
    return Plan.objects.filter(pk=plan_id, status__in=statuses).first()


def test_independent_steps_overlap_and_a_join_starts_after_all_its_dependencies(people, celery_worker):
    plan = approved_plan(
        people,
        [step("a", "sleep_io", {"seconds": 1.0}), step("b", "sleep_io", {"seconds": 1.0}), step("c", "noop", depends_on=["a", "b"])],
    )
    run(people, plan)
    wait_until(lambda: finished(plan.pk), timeout=30, message="the plan to finish")
    found = steps_of(plan)
    assert all(s.status == S.SUCCEEDED for s in found.values())
    a, b, c = found["a"], found["b"], found["c"]
    assert a.started_at < b.finished_at and b.started_at < a.finished_at, "a and b ran at the same time"
    assert c.started_at >= max(a.finished_at, b.finished_at)
    assert Plan.objects.get(pk=plan.pk).status == Plan.Status.SUCCEEDED


def test_a_chain_runs_in_dependency_order_with_outputs_flowing_through_templates(people, celery_worker):
    plan = approved_plan(
        people,
        [
            step("s1", "noop", {"value": 7}),
            step("s2", "noop", {"value": "{{ steps.s1.output }}"}, depends_on=["s1"]),
            step("s3", "noop", depends_on=["s2"], condition="steps.s2.output > 100"),
        ],
    )
    run(people, plan)
    wait_until(lambda: finished(plan.pk), timeout=30, message="the plan to finish")
    found = steps_of(plan)
    assert found["s2"].output == 7 and found["s2"].resolved_args == {"value": 7}
    assert found["s3"].status == S.SKIPPED and "condition" in found["s3"].note
    assert Plan.objects.get(pk=plan.pk).answer_text or wait_until(lambda: Plan.objects.get(pk=plan.pk).answer_text, message="the answer")


def test_a_waiting_gate_holds_only_its_dependents_and_approval_lets_it_run(people, celery_worker):
    plan = approved_plan(
        people,
        [step("g", "high_effect", {"label": "gated"}), step("after", "noop", depends_on=["g"]), step("free", "sleep_io", {"seconds": 0.2})],
    )
    run(people, plan)
    wait_until(lambda: steps_of(plan)["free"].status == S.SUCCEEDED, message="the independent branch to finish")
    found = steps_of(plan)
    assert found["g"].status == S.WAITING_APPROVAL and found["g"].resolved_args == {"label": "gated"}
    assert found["after"].status == S.PENDING and effects("gated") == []
    gates.gate_answer(plan_id=plan.pk, key="g", actor=people[1], approve=True, gate_hash=found["g"].gate_hash)
    wait_until(lambda: finished(plan.pk), timeout=30, message="the plan to finish")
    assert steps_of(plan)["after"].status == S.SUCCEEDED and len(effects("gated")) == 1
    assert AuditEvent.objects.filter(action="gate.approved", step_key="g", actor=people[1]).count() == 1


def test_a_denied_gate_skips_its_dependents_and_the_plan_goes_on(people, celery_worker):
    plan = approved_plan(
        people, [step("g", "high_effect", {"label": "denied"}), step("after", "noop", depends_on=["g"]), step("free", "noop")]
    )
    run(people, plan)
    wait_until(lambda: steps_of(plan)["g"].status == S.WAITING_APPROVAL, message="the gate")
    gates.gate_answer(plan_id=plan.pk, key="g", actor=people[1], approve=False, comment="not today")
    done = wait_until(lambda: finished(plan.pk), timeout=30, message="the plan to finish")
    found = steps_of(plan)
    assert found["g"].status == found["after"].status == S.SKIPPED and found["free"].status == S.SUCCEEDED
    assert done.status == Plan.Status.PARTIALLY_COMPLETED and effects("denied") == []


def test_the_requester_cannot_approve_a_gate_on_their_own_goal(people, celery_worker):
    from django.contrib.auth.models import Group

    alice, _ = people
    alice.groups.add(Group.objects.get(name="approver"))
    plan = approved_plan(people, [step("g", "high_effect", {"label": "four-eyes"})])
    run(people, plan)
    wait_until(lambda: steps_of(plan)["g"].status == S.WAITING_APPROVAL, message="the gate")
    with pytest.raises(ServiceError, match="Four-eyes"):
        gates.gate_answer(plan_id=plan.pk, key="g", actor=alice, approve=True)


def test_a_worker_killed_during_a_non_idempotent_step_never_runs_it_twice(people, celery_worker):
    plan = approved_plan(people, [step("s1", "record_effect", {"label": "kill-me", "seconds": 30})])
    run(people, plan)
    attempt = wait_until(lambda: StepAttempt.objects.filter(step__plan=plan).first(), message="the attempt to start")
    wait_until(lambda: effects("kill-me"), message="the side effect to happen")
    os.kill(int(attempt.worker.rsplit(":", 1)[1]), signal.SIGKILL)
    wait_until(lambda: steps_of(plan)["s1"].status == S.INTERRUPTED, timeout=30, message="the redelivered task to stop at the attempt")
    assert len(effects("kill-me")) == 1
    assert StepAttempt.objects.filter(step__plan=plan).count() == 1
    assert AuditEvent.objects.filter(action="step.interrupted", plan_id=plan.pk).exists()


def test_an_interrupted_step_can_be_skipped_by_an_operator(people, celery_worker):
    plan = approved_plan(people, [step("s1", "record_effect", {"label": "stuck"}), step("s2", "noop", depends_on=["s1"])])
    Plan.objects.filter(pk=plan.pk).update(status=Plan.Status.RUNNING, executing_hash=plan.content_hash)
    Step.objects.filter(plan=plan, key="s1").update(status=S.INTERRUPTED)
    gates.interrupted_step_resolve(plan_id=plan.pk, key="s1", actor=people[0], retry=False)
    wait_until(lambda: finished(plan.pk), message="the plan to finish")
    assert steps_of(plan)["s2"].status == S.SKIPPED and effects("stuck") == []


def test_an_edited_plan_that_was_not_approved_again_does_not_run(people):
    plan = approved_plan(people, [step("s1", "noop")])
    services.step_update(plan_id=plan.pk, actor=people[0], revision=plan.revision, key="s1", changes={"args": {"value": 2}})
    with pytest.raises(ServiceError, match="Only an approved plan can run"):
        run(people, Plan.objects.get(pk=plan.pk))


def test_a_plan_whose_rows_were_changed_behind_its_back_does_not_run(people):
    plan = approved_plan(people, [step("s1", "noop")])
    Step.objects.filter(plan=plan).update(args={"value": 999})
    with pytest.raises(ServiceError, match="not the approved content"):
        run(people, plan)


def test_a_step_refuses_to_execute_when_the_plan_changed_after_the_run_started(people, celery_worker):
    plan = approved_plan(
        people, [step("s1", "sleep_io", {"seconds": 1.0}), step("s2", "high_effect", {"label": "tampered"}, depends_on=["s1"])]
    )
    run(people, plan)
    wait_until(lambda: steps_of(plan)["s1"].status == S.RUNNING, message="s1 to run")
    Step.objects.filter(plan=plan, key="s2").update(args={"label": "changed behind the approval"})
    done = wait_until(lambda: finished(plan.pk), timeout=30, message="the run to stop")
    assert done.status == Plan.Status.FAILED and steps_of(plan)["s2"].status == S.CANCELLED
    assert effects("tampered") == [] and effects("changed behind the approval") == []


def test_a_step_that_keeps_failing_yields_a_replan_proposal_awaiting_approval(people, celery_worker, fake_openai_server):
    import json

    fake_openai_server.reset()
    replacement = {
        "steps": [
            {"key": "s3", "title": "Use the fallback", "tool": "noop", "args": {"value": "{{ steps.s1.output }}"}, "depends_on": ["s1"]}
        ]
    }
    fake_openai_server.reply(json.dumps(replacement))
    plan = approved_plan(people, [step("s1", "noop", {"value": 5}), step("s2", "always_fail", depends_on=["s1"])])
    run(people, plan)
    proposed = wait_until(lambda: finished(plan.pk, Plan.Status.AWAITING_APPROVAL), timeout=30, message="the replan proposal")
    assert proposed.planner_source.startswith("replan by") and proposed.replan_count == 1 and proposed.revision == plan.revision + 1
    found = steps_of(plan)
    assert set(found) == {"s1", "s3"}
    assert found["s1"].status == S.SUCCEEDED and found["s1"].output == 5, "completed steps and outputs are kept"
    assert StepAttempt.objects.filter(step__plan=plan, step__key="s1").count() == 1
    assert AuditEvent.objects.filter(action="step.retrying", plan_id=plan.pk).count() == 1
    assert AuditEvent.objects.filter(action="plan.replan_proposed", plan_id=plan.pk).count() == 1
    replan_request = fake_openai_server.requests[-1]["body"]["messages"][-1]["content"]
    # The replan reads what the run found from the facts ledger (issue 20), not raw outputs.
    assert (
        "upstream unavailable" in replan_request
        and '<fact step="s1" status="succeeded" trust="trusted" title="noop s1">\n5\n</fact>' in replan_request
    )

    # The proposal runs only after a fresh approval, and the kept step does not run again.
    plan_decision_record(
        plan_id=plan.pk, actor=people[1], revision=proposed.revision, content_hash=proposed.content_hash, decision="approved"
    )
    run(people, plan)
    wait_until(lambda: finished(plan.pk), timeout=30, message="the replanned run")
    assert steps_of(plan)["s3"].output == 5
    assert StepAttempt.objects.filter(step__plan=plan, step__key="s1").count() == 1


def test_a_tool_that_exceeds_its_timeout_fails_with_a_clear_error(people, celery_worker, fake_openai_server):
    fake_openai_server.reset()
    plan = approved_plan(people, [step("s1", "too_slow", {"seconds": 5})])
    run(people, plan)
    wait_until(lambda: finished(plan.pk, Plan.Status.FAILED, Plan.Status.AWAITING_APPROVAL), timeout=40, message="the timeout")
    assert "Timed out after 1 s" in StepAttempt.objects.filter(step__plan=plan).first().error


def test_cancel_stops_what_has_not_started(people, celery_worker):
    plan = approved_plan(people, [step("s1", "sleep_io", {"seconds": 1.0}), step("s2", "noop", depends_on=["s1"])])
    run(people, plan)
    wait_until(lambda: steps_of(plan)["s1"].status == S.RUNNING, message="s1 to run")
    engine.plan_cancel(plan_id=plan.pk, actor=people[0])
    wait_until(lambda: steps_of(plan)["s1"].status == S.SUCCEEDED, message="s1 to finish")
    assert steps_of(plan)["s2"].status == S.CANCELLED and Plan.objects.get(pk=plan.pk).status == Plan.Status.CANCELLED


def test_the_reconciler_requeues_idempotent_and_interrupts_other_stuck_steps(people, celery_worker):
    from datetime import timedelta

    from django.utils import timezone

    plan = approved_plan(people, [step("idem", "noop"), step("effect", "record_effect", {"label": "x"})])
    Plan.objects.filter(pk=plan.pk).update(status=Plan.Status.RUNNING, executing_hash=plan.content_hash)
    Step.objects.filter(plan=plan).update(status=S.RUNNING, deadline=timezone.now() - timedelta(seconds=1))
    counts = reconcile.reconcile()
    assert (counts["requeued"], counts["interrupted"]) == (1, 1)
    found = steps_of(plan)
    assert found["idem"].status == S.QUEUED and found["effect"].status == S.INTERRUPTED
    assert AuditEvent.objects.filter(action="step.requeued", step_key="idem").exists()
    assert AuditEvent.objects.filter(action="step.interrupted", step_key="effect").exists()
    again = reconcile.reconcile()
    assert (again["requeued"], again["interrupted"]) == (0, 0)


def test_the_on_call_demo_notifies_when_breached_and_skips_when_not(people, celery_worker):
    from planning.demo import seed_demo
    from planning.planner import draft_with_playbook
    from sandbox.models import DataRow

    seed_demo()
    steps = draft_with_playbook("Check open ticket count against the SLA and notify the on-call engineer if breached").steps
    breached = approved_plan(people, steps, goal="on-call breached")
    run(people, breached)
    wait_until(lambda: steps_of(breached)["s3"].status == S.WAITING_APPROVAL, message="the notify gate")
    assert steps_of(breached)["s3"].resolved_args["message"] == "SLA breached: 12 open support tickets, threshold is 10."
    gates.gate_answer(plan_id=breached.pk, key="s3", actor=people[1], approve=True)
    wait_until(lambda: finished(breached.pk), timeout=30, message="the breached run")
    assert DataRow.objects.filter(table__name="notifications").count() == 1

    desk = DataRow.objects.get(table__name="oncall_desk", key="sla_max_open_tickets")
    desk.data = {**desk.data, "value": {"support": 20}}
    desk.save()
    calm = approved_plan(people, steps, goal="on-call calm")
    run(people, calm)
    wait_until(lambda: finished(calm.pk), timeout=30, message="the calm run")
    assert steps_of(calm)["s3"].status == S.SKIPPED and DataRow.objects.filter(table__name="notifications").count() == 1


def test_the_store_demo_purchases_update_stock_and_balance_one_row_per_item(people, celery_worker):
    from planning.demo import seed_demo
    from planning.planner import draft_with_playbook
    from sandbox.models import DataRow

    seed_demo()
    steps = draft_with_playbook("I want to buy 3 pairs of classic sunglasses and 1 pair of aviator sunglasses").steps
    plan = approved_plan(people, steps, goal="buy two kinds")
    run(people, plan)
    for key in ["s3", "s4"]:
        wait_until(lambda key=key: steps_of(plan)[key].status == S.WAITING_APPROVAL, message=f"the {key} gate")
        gates.gate_answer(plan_id=plan.pk, key=key, actor=people[1], approve=True)
    wait_until(lambda: finished(plan.pk), timeout=30, message="the purchases")
    stock = {row.key: row.data["quantity_in_stock"] for row in DataRow.objects.filter(table__name="inventory")}
    assert stock["SG005"] == 7 and stock["SG001"] == 22
    balances = [row.data["balance_after_transaction"] for row in DataRow.objects.filter(table__name="transactions").order_by("id")]
    assert balances == [500, 680, 760]
