"""The attempt key refuses a second start: a step found queued again under the same queueing whose
attempt row exists already (its first start committed) is interrupted for a person, never run again,
and the chain still verifies."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals import audit
from core import jobs
from execution import engine, worker
from planning.models import Step, StepAttempt
from tests.conftest import make_user
from tests.execution.recovery_helpers import running_plan, steps_of
from tests.fixtures.plans import step
from tests.tools import effects

S = Step.Status


@pytest.fixture
def people(db, monkeypatch):
    monkeypatch.setattr(jobs, "enqueue", lambda *args, **options: None)
    return make_user("alice", "operator"), make_user("bob", "approver")


def test_a_second_start_of_the_same_attempt_is_interrupted_not_run(people):
    plan = running_plan(people, [step("s1", "record_effect", {"label": "once"}), step("s2", "noop", depends_on=["s1"])])
    engine.dispatch(plan.pk)
    queued = steps_of(plan)["s1"]
    assert worker.execute_step(queued.pk, engine.queue_token(queued)) == "succeeded"
    # As if the step's row had been put back to the queueing its attempt row was written for.
    Step.objects.filter(pk=queued.pk).update(status=S.QUEUED, queued_at=queued.queued_at, output=None, finished_at=None)
    with CaptureQueriesContext(connection) as captured:
        assert worker.execute_step(queued.pk, engine.queue_token(queued)) == "refused"
    assert not any(q["sql"].startswith("ROLLBACK TO SAVEPOINT") for q in captured.captured_queries), "a conflict is not an error"
    again = steps_of(plan)["s1"]
    assert again.status == S.INTERRUPTED and "already started once" in again.note
    assert StepAttempt.objects.filter(step=queued).count() == 1 and len(effects("once")) == 1
    assert audit.verify()["ok"]
