"""Redis restarts mid-run, empty (no persistence), taking every queued message with it: the steps that
were waiting in it are queued again (not interrupted: they never started), and the plan finishes."""

import pytest

from approvals import audit
from execution import engine, reconcile
from execution.transitions import S
from planning.models import Plan, Step
from tests.conftest import make_user, wait_until
from tests.fixtures.plans import approved_plan, step
from tests.tools import effects


@pytest.fixture
def people(transactional_db):
    return make_user("alice", "operator"), make_user("bob", "approver")


def test_a_broker_restart_that_loses_queued_steps_requeues_them_and_the_plan_finishes(people, fault_worker, fault_redis):
    plan = approved_plan(
        people,
        [
            step("wait", "sleep_io", {"seconds": 1.0}),
            step("act", "fault_effect", {"label": "pay-a"}, depends_on=["wait"]),
            step("after", "fault_read", depends_on=["act"]),
        ],
    )
    fault_worker.start()
    engine.plan_run(plan_id=plan.pk, actor=people[0])
    wait_until(lambda: Step.objects.filter(plan=plan, key="wait", status=S.RUNNING).exists(), message="the first step to start")
    fault_redis.stop()
    wait_until(lambda: Step.objects.filter(plan=plan, key="act", status=S.QUEUED).exists(), message="the next step to be queued")
    # The worker goes too, so no publish of the queued step still retrying can reach the new broker: the
    # message is surely lost.
    fault_worker.kill()
    fault_redis.start()

    def finished():
        # With celery/kombu 5.7 and redis-py 8.1 the worker exits on losing its broker ("Unrecoverable
        # error: AttributeError 'NoneType' object has no attribute 'hostname'"): a supervisor restarts it.
        fault_worker.running()
        reconcile.reconcile()
        return Plan.objects.filter(pk=plan.pk, status=Plan.Status.SUCCEEDED).exclude(answer_text="").first()

    wait_until(finished, timeout=45, interval=0.25, message="the plan to finish")
    assert len(effects("pay-a")) == 1
    assert not Step.objects.filter(plan=plan, status=S.INTERRUPTED).exists(), "a step that never started was handed to a person"
    assert audit.verify()["ok"]
