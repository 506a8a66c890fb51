"""The dispatch after a step succeeds reads only that step's dependants and their dependencies, so its
cost does not grow with the plan; a join waits for its last dependency, and what the narrow read cannot
decide (a skip that cascades, the end of the plan) is decided by the whole-plan dispatch."""

import threading

import pytest
from django.db import connections, transaction

from core import jobs
from execution import engine
from planning.models import Plan, Step
from tests.conftest import make_user
from tests.execution.recovery_helpers import running_plan, steps_of
from tests.fixtures.plans import step

S = Step.Status


@pytest.fixture
def people(db, monkeypatch):
    monkeypatch.setattr(jobs, "enqueue", lambda *args, **options: None)
    return make_user("alice", "operator"), make_user("bob", "approver")


def test_the_dispatch_reads_the_finished_steps_dependants_and_their_dependencies_only(people):
    chain = [step("s1", "noop")] + [step(f"s{i}", "noop", depends_on=[f"s{i - 1}"]) for i in range(2, 29)]
    plan = running_plan(people, chain + [step("side", "noop"), step("join", "noop", depends_on=["s2", "side"])], s1=S.SUCCEEDED)
    assert {row.key for row in engine._neighbourhood(plan, "s2")} == {"s2", "s3", "join", "side"}


def test_a_join_is_queued_once_its_last_dependency_succeeds(people):
    plan = running_plan(
        people, [step("a", "noop"), step("b", "noop"), step("join", "noop", depends_on=["a", "b"])], a=S.SUCCEEDED, b=S.RUNNING
    )
    engine.dispatch_after(plan.pk, "a")
    assert steps_of(plan)["join"].status == S.PENDING, "b is still running"
    Step.objects.filter(plan=plan, key="b").update(status=S.SUCCEEDED, output=2)
    engine.dispatch_after(plan.pk, "b")
    assert steps_of(plan)["join"].status == S.QUEUED


def test_a_skip_cascades_and_the_plan_ends_through_the_whole_plan_dispatch(people):
    plan = running_plan(
        people,
        [
            step("s1", "noop", {"value": 1}),
            step("s2", "noop", depends_on=["s1"], condition="steps.s1.output > 100"),
            step("s3", "noop", depends_on=["s2"]),
        ],
    )
    Step.objects.filter(plan=plan, key="s1").update(status=S.SUCCEEDED, output=1)
    engine.dispatch_after(plan.pk, "s1")
    found = steps_of(plan)
    assert found["s2"].status == S.SKIPPED and found["s3"].status == S.SKIPPED
    assert Plan.objects.get(pk=plan.pk).status == Plan.Status.SUCCEEDED


def test_arguments_that_read_earlier_outputs_are_resolved_with_their_provenance(people):
    plan = running_plan(
        people,
        [
            step("s1", "noop", {"value": 5}),
            step("s2", "noop", {"value": 1}, depends_on=["s1"]),
            step("s3", "noop", {"value": "{{ steps.s1.output }}"}, depends_on=["s2"]),
        ],
    )
    Step.objects.filter(plan=plan, key__in=["s1", "s2"]).update(status=S.SUCCEEDED, output=5)
    engine.dispatch_after(plan.pk, "s2")
    s3 = steps_of(plan)["s3"]
    assert s3.status == S.QUEUED and s3.resolved_args == {"value": 5}
    assert [entry["step"] for entry in s3.provenance["value"]] == ["s1"]


def test_two_dependencies_finishing_together_queue_their_join_exactly_once(transactional_db, monkeypatch):
    sent = []
    monkeypatch.setattr(jobs, "enqueue", lambda name, *args, **options: sent.append((name, *args)))
    people = make_user("alice", "operator"), make_user("bob", "approver")
    plan = running_plan(
        people, [step("a", "noop"), step("b", "noop"), step("join", "noop", depends_on=["a", "b"])], a=S.RUNNING, b=S.RUNNING
    )
    both_written = threading.Barrier(2, timeout=10)
    errors = []

    def finish(key):
        try:
            with transaction.atomic():
                Step.objects.filter(plan=plan, key=key).update(status=S.SUCCEEDED, output=1)
                both_written.wait()  # each finish is written while the other's is not yet committed
            engine.dispatch_after(plan.pk, key)
        except Exception as error:  # noqa: BLE001
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=finish, args=(key,)) for key in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    join = steps_of(plan)["join"]
    assert join.status == S.QUEUED
    assert [args for args in sent if args[0].endswith("execute_step_task")] == [
        ("planning.tasks.execute_step_task", join.pk, engine.queue_token(join))
    ]
