"""Running a HIGH step again needs a second person: the first attempt may already have acted."""

import pytest
from django.contrib.auth.models import Group

from approvals.models import AuditEvent
from core import jobs
from core.errors import ServiceError
from execution import gates
from planning.models import Step, StepAttempt
from tests.conftest import make_user
from tests.execution.recovery_helpers import running_plan, steps_of
from tests.fixtures.plans import step

S = Step.Status


@pytest.fixture
def people(db):
    return make_user("alice", "operator"), make_user("bob", "approver")


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.setattr(jobs, "enqueue", lambda *args, **options: None)


def interrupted_high_step(people):
    plan = running_plan(people, [step("pay", "high_effect", {"label": "pay"})], pay=S.INTERRUPTED)
    pay = steps_of(plan)["pay"]
    Step.objects.filter(pk=pay.pk).update(gate_hash="hash-of-the-first-attempt")
    StepAttempt.objects.create(step=pay, number=1, idempotency_key=f"first-{pay.pk}")
    return plan


def both_operator_and_approver(username):
    user = make_user(username, "operator")
    user.groups.add(Group.objects.get(name="approver"))
    return user


def test_retrying_an_interrupted_high_step_opens_a_new_gate_bound_to_the_next_attempt(people):
    plan = interrupted_high_step(people)
    gates.interrupted_step_resolve(plan_id=plan.pk, key="pay", actor=people[0], retry=True)
    pay = steps_of(plan)["pay"]
    assert pay.status == S.WAITING_APPROVAL and pay.gate_hash not in {"", "hash-of-the-first-attempt"}
    opened = AuditEvent.objects.get(action="gate.opened", step_key="pay")
    assert opened.actor == people[0] and opened.data["attempt"] == 2 and opened.data["retry_requested_by"] == "alice"
    assert opened.data["gate_hash"] == pay.gate_hash


def test_the_person_who_asked_for_the_retry_cannot_approve_it(people):
    plan = interrupted_high_step(people)
    dave = both_operator_and_approver("dave")
    gates.interrupted_step_resolve(plan_id=plan.pk, key="pay", actor=dave, retry=True)
    gate_hash = steps_of(plan)["pay"].gate_hash
    with pytest.raises(ServiceError, match="you asked for this retry"):
        gates.gate_answer(plan_id=plan.pk, key="pay", actor=dave, approve=True, gate_hash=gate_hash)
    gates.gate_answer(plan_id=plan.pk, key="pay", actor=people[1], approve=True, gate_hash=gate_hash)
    assert steps_of(plan)["pay"].status == S.QUEUED


def test_the_goals_requester_cannot_approve_a_retry_either(people):
    plan = interrupted_high_step(people)
    alice = both_operator_and_approver("alice")
    gates.interrupted_step_resolve(plan_id=plan.pk, key="pay", actor=make_user("dave", "operator"), retry=True)
    with pytest.raises(ServiceError, match="Four-eyes"):
        gates.gate_answer(plan_id=plan.pk, key="pay", actor=alice, approve=True, gate_hash=steps_of(plan)["pay"].gate_hash)


def test_an_approval_of_the_first_attempt_does_not_cover_the_retry(people):
    plan = interrupted_high_step(people)
    gates.interrupted_step_resolve(plan_id=plan.pk, key="pay", actor=people[0], retry=True)
    with pytest.raises(ServiceError, match="not the ones waiting"):
        gates.gate_answer(plan_id=plan.pk, key="pay", actor=people[1], approve=True, gate_hash="hash-of-the-first-attempt")


def test_retrying_an_interrupted_medium_step_queues_it_without_a_gate(people):
    plan = running_plan(people, [step("s1", "record_effect", {"label": "medium"})], s1=S.INTERRUPTED)
    gates.interrupted_step_resolve(plan_id=plan.pk, key="s1", actor=people[0], retry=True)
    assert steps_of(plan)["s1"].status == S.QUEUED
