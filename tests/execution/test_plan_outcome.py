"""A run "succeeded" only when every step meant to run ran; a denied gate leaves the plan partially
completed, with a one-line reason on the page, in the inbox, in the API and in Metrics."""

import pytest

from execution import engine, gates
from execution.metrics import summary
from planning.models import Plan, Step
from tests.conftest import make_user, wait_until
from tests.fixtures.plans import approved_plan, step

S = Step.Status


@pytest.fixture
def people(transactional_db):
    return make_user("alice", "operator"), make_user("bob", "approver")


def finished(plan_id):
    return Plan.objects.filter(pk=plan_id, status__in=[Plan.Status.SUCCEEDED, Plan.Status.PARTIALLY_COMPLETED, Plan.Status.FAILED]).first()


def test_a_denied_gate_leaves_the_plan_partially_completed_with_its_reason_everywhere(people, celery_worker, client):
    alice, bob = people
    plan = approved_plan(people, [step("g", "high_effect", {"label": "no"}), step("after", "noop", depends_on=["g"]), step("free", "noop")])
    engine.plan_run(plan_id=plan.pk, actor=alice)
    wait_until(lambda: Step.objects.get(plan=plan, key="g").status == S.WAITING_APPROVAL, message="the gate")
    gates.gate_answer(plan_id=plan.pk, key="g", actor=bob, approve=False, comment="not today")

    done = wait_until(lambda: finished(plan.pk), timeout=30, message="the plan to finish")
    assert done.status == Plan.Status.PARTIALLY_COMPLETED
    assert done.failure_reason == "1 of 3 steps done: g Denied by bob: not today; after skipped (g skipped)."

    client.force_login(alice)
    page = client.get(f"/plans/{plan.pk}/").content.decode()
    assert "Partially completed" in page and "g Denied by bob: not today" in page
    inbox = client.get("/?group=attention").content.decode()
    assert "Partially completed" in inbox and "1 of 3 steps done" in inbox
    body = client.get(f"/api/plans/{plan.pk}").json()
    assert body["status"] == "partially_completed" and body["failure_reason"].startswith("1 of 3 steps done")
    metrics = summary()
    assert metrics.by_status == {"Partially completed": 1} and metrics.success_rate == 0
    wait_until(lambda: Plan.objects.get(pk=plan.pk).answer_text, message="the answer of a partially completed plan")


def test_a_step_skipped_by_its_false_condition_was_not_meant_to_run_so_the_plan_succeeds(people, celery_worker):
    plan = approved_plan(
        people,
        [
            step("count", "noop", {"value": 1}),
            step("notify", "noop", depends_on=["count"], condition="steps.count.output > 5"),
            step("then", "noop", depends_on=["notify"]),
        ],
    )
    engine.plan_run(plan_id=plan.pk, actor=people[0])
    done = wait_until(lambda: finished(plan.pk), timeout=30, message="the plan to finish")
    assert Step.objects.get(plan=plan, key="notify").status == S.SKIPPED
    assert done.status == Plan.Status.SUCCEEDED and done.failure_reason == ""
