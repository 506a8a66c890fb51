"""A worker crashes (os._exit) or loses its database at each named failpoint of a run; after a restart,
every plan still reaches an end or a person, no non-idempotent effect happens twice, and the audit chain
verifies.

The windows the reconciler or the claim must close (each failed before the recovery of issue 13):
after_finish and during_dispatch (a finished step whose dispatch was lost stranded its plan),
during_replan and during_answer (a failed or finished run never got its replan or answer)."""

import pytest

from approvals import audit
from execution import engine, gates, reconcile
from execution.transitions import S
from planning.models import Plan, Step
from tests.conftest import make_user, wait_until
from tests.fixtures.plans import approved_plan, step
from tests.tools import effects

ACTING = ["pay-a", "pay-b"]


@pytest.fixture
def people(transactional_db):
    return make_user("alice", "operator"), make_user("bob", "approver")


def mixed_plan(people) -> Plan:
    """Idempotent reads and non-idempotent effects, in a chain and beside it."""
    return approved_plan(
        people,
        [
            step("read", "fault_read", {"value": 1}),
            step("act", "fault_effect", {"label": "pay-a"}, depends_on=["read"]),
            step("after", "fault_read", {"value": 2}, depends_on=["act"]),
            step("beside", "fault_effect", {"label": "pay-b"}),
        ],
    )


def chain_plan(people) -> Plan:
    """One chain, so no parallel branch's dispatch can cover for a lost one."""
    return approved_plan(
        people,
        [
            step("read", "fault_read", {"value": 1}),
            step("act", "fault_effect", {"label": "pay-a"}, depends_on=["read"]),
            step("after", "fault_read", {"value": 2}, depends_on=["act"]),
        ],
    )


def failing_plan(people) -> Plan:
    return approved_plan(people, [step("act", "fault_effect", {"label": "pay-a"}), step("broken", "fault_fail", depends_on=["act"])])


def settled(plan_id: int) -> bool:
    """At an end (with its answer, or a replan waiting for approval), or waiting for a person."""
    plan = Plan.objects.get(pk=plan_id)
    if plan.status in {Plan.Status.SUCCEEDED, Plan.Status.FAILED}:
        return bool(plan.answer_text)
    if plan.status in {Plan.Status.AWAITING_APPROVAL, Plan.Status.CANCELLED}:
        return True
    rows = list(Step.objects.filter(plan_id=plan_id).values_list("key", "status", "depends_on"))
    moving = any(status in {S.QUEUED, S.RUNNING} for _, status, _ in rows)
    return not moving and not engine.needs_dispatch(rows)


def wait_for_recovery(plan: Plan, timeout: float = 40) -> Plan:
    """The reconciler runs on every poll (in place of beat), as often as a test needs it."""
    wait_until(lambda: reconcile.reconcile() is not None and settled(plan.pk), timeout=timeout, interval=0.25, message="the plan to settle")
    return Plan.objects.get(pk=plan.pk)


def assert_promises_kept(plan: Plan) -> None:
    for label in ACTING:
        assert len(effects(label)) <= 1, f"the effect {label} happened {len(effects(label))} times"
    for found in Step.objects.filter(plan=plan, tool="fault_effect", status=S.SUCCEEDED):
        assert len(effects(found.args["label"])) == 1, f"{found.key} succeeded without its effect"
    assert audit.verify()["ok"]


def crash_then_restart(fault_worker, point: str, plan: Plan, people) -> Plan:
    fault_worker.start(f"{point}=crash")
    engine.plan_run(plan_id=plan.pk, actor=people[0])
    wait_until(fault_worker.fired, timeout=30, message=f"the worker to reach {point}")
    fault_worker.restart()
    return wait_for_recovery(plan)


WORKER_POINTS = ["after_claim", "after_attempt_row", "in_tool_call", "after_tool_returns", "after_finish", "during_dispatch"]
AFTERMATH_POINTS = ["during_replan", "during_answer"]


@pytest.mark.parametrize("point", WORKER_POINTS)
def test_a_worker_crashing_mid_step_leaves_no_plan_stranded_and_no_effect_repeated(point, people, fault_worker):
    plan = crash_then_restart(fault_worker, point, mixed_plan(people), people)
    assert_promises_kept(plan)


@pytest.mark.parametrize("point", WORKER_POINTS)
def test_a_database_drop_mid_step_leaves_no_plan_stranded_and_no_effect_repeated(point, people, fault_worker):
    plan = chain_plan(people)
    fault_worker.start(f"{point}=db_drop")
    engine.plan_run(plan_id=plan.pk, actor=people[0])
    wait_until(fault_worker.fired, timeout=30, message=f"the worker to reach {point}")
    assert_promises_kept(wait_for_recovery(plan))


@pytest.mark.parametrize("mode", ["crash", "db_drop"])
@pytest.mark.parametrize("point", AFTERMATH_POINTS)
def test_a_run_that_ends_always_gets_its_replan_or_answer_despite_a_fault(point, mode, people, fault_worker):
    plan = failing_plan(people) if point == "during_replan" else mixed_plan(people)
    fault_worker.start(f"{point}={mode}")
    engine.plan_run(plan_id=plan.pk, actor=people[0])
    wait_until(fault_worker.fired, timeout=30, message=f"the worker to reach {point}")
    if mode == "crash":
        fault_worker.restart()
    plan = wait_for_recovery(plan)
    expected = Plan.Status.AWAITING_APPROVAL if point == "during_replan" else Plan.Status.SUCCEEDED
    assert plan.status == expected
    assert_promises_kept(plan)


def test_a_gate_decision_that_loses_its_database_changes_nothing_and_can_be_made_again(people, fault_worker, monkeypatch):
    plan = approved_plan(people, [step("pay", "fault_pay", {"label": "pay-a"}), step("after", "fault_read", depends_on=["pay"])])
    fault_worker.start()
    engine.plan_run(plan_id=plan.pk, actor=people[0])
    pay = wait_until(lambda: Step.objects.filter(plan=plan, key="pay", status=S.WAITING_APPROVAL).first(), message="the gate")
    monkeypatch.setenv("COUNTERSIGN_FAILPOINTS", "during_gate_decision=db_drop")
    with pytest.raises(Exception, match="database connection dropped"):
        gates.gate_answer(plan_id=plan.pk, key="pay", actor=people[1], approve=True, gate_hash=pay.gate_hash)
    monkeypatch.delenv("COUNTERSIGN_FAILPOINTS")
    assert Step.objects.get(pk=pay.pk).status == S.WAITING_APPROVAL and effects("pay-a") == []
    gates.gate_answer(plan_id=plan.pk, key="pay", actor=people[1], approve=True, gate_hash=pay.gate_hash)
    plan = wait_for_recovery(plan)
    assert plan.status == Plan.Status.SUCCEEDED and len(effects("pay-a")) == 1
    assert_promises_kept(plan)
