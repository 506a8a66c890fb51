"""The reconciler and the claim pick up every piece of work a crash can drop between two transactions."""

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import AuditEvent
from core import jobs
from execution import engine, reconcile, worker
from planning import services
from planning.models import Goal, Plan, Step, StepAttempt
from tests.conftest import make_user
from tests.execution.recovery_helpers import running_plan, steps_of
from tests.fixtures.plans import step
from tests.tools import effects

S = Step.Status


@pytest.fixture
def people(db):
    return make_user("alice", "operator"), make_user("bob", "approver")


@pytest.fixture
def queued(monkeypatch):
    """The tasks services queue, by name, instead of sending them to the broker."""
    sent = []
    monkeypatch.setattr(jobs, "enqueue", lambda name, *args, **options: sent.append((name.rsplit(".", 1)[-1], *args)))
    return sent


def test_a_running_plan_whose_dispatch_was_lost_is_dispatched_by_the_reconciler(people, queued):
    plan = running_plan(people, [step("s1", "noop"), step("s2", "noop", depends_on=["s1"])], s1=S.SUCCEEDED)
    assert reconcile.reconcile()["dispatched"] == 1
    assert steps_of(plan)["s2"].status == S.QUEUED
    assert ("execute_step_task", steps_of(plan)["s2"].pk, engine.queue_token(steps_of(plan)["s2"])) in queued


def test_a_running_plan_with_nothing_left_open_is_finalised_by_the_reconciler(people, queued):
    plan = running_plan(people, [step("s1", "noop")], s1=S.SUCCEEDED)
    reconcile.reconcile()
    assert Plan.objects.get(pk=plan.pk).status == Plan.Status.SUCCEEDED
    assert ("compose_answer_task", plan.pk) in queued


def test_a_plan_waiting_for_a_person_is_left_alone(people, queued):
    running_plan(people, [step("s1", "record_effect", {"label": "x"}), step("s2", "noop", depends_on=["s1"])], s1=S.INTERRUPTED)
    assert reconcile.reconcile()["dispatched"] == 0 and queued == []


def test_a_redelivered_task_that_finds_its_step_finished_dispatches_what_it_unblocked(people, queued):
    plan = running_plan(people, [step("s1", "noop"), step("s2", "noop", depends_on=["s1"])], s1=S.SUCCEEDED)
    assert worker.execute_step(steps_of(plan)["s1"].pk) == "refused"
    assert steps_of(plan)["s2"].status == S.QUEUED


def test_a_finished_plan_without_its_replan_gets_it_again_after_the_deadline(people, queued, settings):
    settings.COUNTERSIGN_AFTERMATH_DEADLINE_S = 60
    plan = running_plan(people, [step("s1", "always_fail")], s1=S.FAILED)
    Plan.objects.filter(pk=plan.pk).update(status=Plan.Status.FAILED)
    assert reconcile.reconcile()["aftermath"] == 0, "still within the deadline"
    later = timezone.now() + timedelta(seconds=61)
    assert reconcile.reconcile(now=later)["aftermath"] == 1
    assert queued == [("replan_task", plan.pk)]
    soon_after = timezone.now() + timedelta(seconds=30)
    assert reconcile.reconcile(now=soon_after)["aftermath"] == 0, "queued again only once per deadline"
    assert AuditEvent.objects.filter(action="plan.aftermath_requeued", plan_id=plan.pk).count() == 1


def test_a_succeeded_plan_without_its_answer_gets_it_again_after_the_deadline(people, queued, settings):
    plan = running_plan(people, [step("s1", "noop")], s1=S.SUCCEEDED)
    Plan.objects.filter(pk=plan.pk).update(status=Plan.Status.SUCCEEDED)
    reconcile.reconcile(now=timezone.now() + timedelta(seconds=settings.COUNTERSIGN_AFTERMATH_DEADLINE_S + 1))
    assert queued == [("compose_answer_task", plan.pk)]


def test_a_plan_stuck_in_planning_past_its_deadline_fails_planning_and_can_be_planned_again(people, queued, settings):
    alice, _ = people
    plan = Plan.objects.create(goal=Goal.objects.create(text="Stuck", requester=alice))
    later = timezone.now() + timedelta(seconds=settings.COUNTERSIGN_PLANNING_DEADLINE_S + 1)
    assert reconcile.reconcile()["planning_failed"] == 0
    assert reconcile.reconcile(now=later)["planning_failed"] == 1
    plan.refresh_from_db()
    assert plan.status == Plan.Status.PLANNING_FAILED and "did not finish" in plan.failure_reason
    services.plan_retry(plan=plan, actor=alice)
    assert Plan.objects.get(pk=plan.pk).status == Plan.Status.PLANNING


def test_a_queued_step_that_was_never_claimed_is_queued_again_not_interrupted(people, queued, settings):
    plan = running_plan(people, [step("s1", "record_effect", {"label": "waited"})])
    engine.dispatch(plan.pk)
    first = steps_of(plan)["s1"]
    assert first.deadline >= timezone.now() + timedelta(seconds=settings.COUNTERSIGN_QUEUED_DEADLINE_S - 5)
    counts = reconcile.reconcile(now=first.deadline + timedelta(seconds=1))
    again = steps_of(plan)["s1"]
    assert counts["requeued"] == 1 and counts["interrupted"] == 0
    assert again.status == S.QUEUED and again.queued_at > first.queued_at


def test_a_message_from_an_earlier_queueing_does_not_run_the_step(people, queued):
    plan = running_plan(people, [step("s1", "record_effect", {"label": "stale"})])
    engine.dispatch(plan.pk)
    old_token = engine.queue_token(steps_of(plan)["s1"])
    reconcile.reconcile(now=steps_of(plan)["s1"].deadline + timedelta(seconds=1))
    assert worker.execute_step(steps_of(plan)["s1"].pk, old_token) == "stale"
    assert steps_of(plan)["s1"].status == S.QUEUED and effects("stale") == []


def test_the_run_deadline_starts_at_the_claim(people, queued, settings):
    plan = running_plan(people, [step("s1", "record_effect", {"label": "claimed"})])
    engine.dispatch(plan.pk)
    s1 = steps_of(plan)["s1"]
    claimed_at = timezone.now()
    assert worker.execute_step(s1.pk, engine.queue_token(s1)) == "succeeded"
    attempt = StepAttempt.objects.get(step=s1)
    started = steps_of(plan)["s1"]
    assert started.deadline >= claimed_at + timedelta(seconds=60 + settings.COUNTERSIGN_DEADLINE_GRACE_S)
    assert attempt.status == "succeeded" and len(effects("claimed")) == 1
