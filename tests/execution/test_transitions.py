"""Step transitions go through one checked helper: a legal move is saved, audited and announced together;
an illegal one is an error that writes nothing."""

import pytest

from approvals.models import AuditEvent
from execution.transitions import ALLOWED, IllegalTransition, step_finish, step_transition
from planning.models import Goal, Plan, Step
from tests.conftest import make_user

S = Step.Status


@pytest.fixture
def step(db):
    alice = make_user("alice", "operator")
    plan = Plan.objects.create(goal=Goal.objects.create(text="Transitions", requester=alice), status=Plan.Status.RUNNING)
    return Step.objects.create(plan=plan, key="s1", position=0, title="Look up", tool="noop", status=S.RUNNING)


def test_every_step_status_has_a_row_in_the_transition_table():
    assert set(ALLOWED) == set(S.values)


def test_a_finished_step_never_moves_again(step):
    step_finish(step, S.SUCCEEDED, output={"count": 3})
    for target in S.values:
        with pytest.raises(IllegalTransition):
            step_transition(Step.objects.get(pk=step.pk), target)


def test_an_illegal_move_is_refused_and_writes_nothing(step):
    events = AuditEvent.objects.count()
    step.status = S.PENDING
    step.save(update_fields=["status"])
    with pytest.raises(IllegalTransition, match="cannot go from pending to running"):
        step_transition(step, S.RUNNING)
    assert Step.objects.get(pk=step.pk).status == S.PENDING
    assert AuditEvent.objects.count() == events


def test_a_legal_move_saves_the_step_and_records_its_event(step):
    step_finish(step, S.FAILED, error="the tool said no")
    saved = Step.objects.get(pk=step.pk)
    assert (saved.status, saved.error, saved.finished_at is not None) == (S.FAILED, "the tool said no", True)
    event = AuditEvent.objects.filter(plan_id=step.plan_id).latest("seq")
    assert (event.action, event.step_key, event.data["error"]) == ("step.failed", "s1", "the tool said no")


def test_a_running_step_cannot_be_cancelled_but_a_queued_one_can(step):
    """Cancelling a run leaves running steps to finish: the table says so, and the cancel follows it."""
    assert S.CANCELLED in ALLOWED[S.QUEUED]
    assert S.CANCELLED not in ALLOWED[S.RUNNING]
