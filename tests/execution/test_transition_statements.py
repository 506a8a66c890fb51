"""What one step costs the database, phase by phase: its claim, its finish, and the dispatch of its
dependant. Each phase has its own ceiling, and the whole step stays within issue 19's goal of 12, the
same in a 3-step and a 30-step chain (so nothing grows with the plan), so no phase can creep back up
unnoticed (docs/performance.md, "Statements per step"). Savepoints are not statements of ours and are
not counted."""

from collections import defaultdict

from django.db import connection

from core import jobs
from execution import engine, worker
from planning.models import Step
from tests.conftest import make_user
from tests.fixtures.plans import approved_plan, step

# Measured 2026-11-23 on PostgreSQL: claim 4 (lock and read the step with its plan, approval and attempt
# count in one statement; attempt row + running in one; the audit append, 2), finish 3 (attempt +
# result in one conditional statement; audit, 2), dispatch 3 (lock the plan, read the finished step's
# dependants and their dependencies, queue the dependant). 24 before issue 19's second pass.
CEILINGS = {"claim": 4, "finish": 3, "dispatch": 3}
GOAL = 12


def statements_by_phase(people, length: int, monkeypatch) -> dict[str, list[str]]:
    plan = approved_plan(people, [step("s1", "noop")] + [step(f"s{i}", "noop", depends_on=[f"s{i - 1}"]) for i in range(2, length + 1)])
    engine.plan_run(plan_id=plan.pk, actor=people[0])
    worker.execute_step(Step.objects.get(plan=plan, key="s1").pk)
    middle = Step.objects.get(plan=plan, key="s2")
    phase, found = ["other"], defaultdict(list)
    with monkeypatch.context() as patched:
        for name, function in [
            ("claim", "_claim"),
            ("finish", "_finish"),
            ("dispatch", "_has_work"),
            ("dispatch", "dispatch"),
            ("dispatch", "dispatch_after"),
        ]:
            patched.setattr(worker, function, _in_phase(name, getattr(worker, function), phase))

        def record(execute, sql, params, many, context):
            if not sql.startswith(("SAVEPOINT", "RELEASE SAVEPOINT")):
                found[phase[-1]].append(sql)
            return execute(sql, params, many, context)

        with connection.execute_wrapper(record):
            assert worker.execute_step(middle.pk) == "succeeded"
    assert Step.objects.get(plan=plan, key="s3").status == Step.Status.QUEUED
    return dict(found)


def _in_phase(name, function, phase):
    def wrapped(*args, **kwargs):
        phase.append(name)
        try:
            return function(*args, **kwargs)
        finally:
            phase.pop()

    return wrapped


def test_a_claim_and_a_finish_stay_under_their_ceilings_and_do_not_grow_with_the_plan(db, monkeypatch):
    monkeypatch.setattr(jobs, "enqueue", lambda *args, **options: None)
    people = make_user("alice", "operator"), make_user("bob", "approver")
    short, long = statements_by_phase(people, 3, monkeypatch), statements_by_phase(people, 30, monkeypatch)
    assert {name: len(sqls) for name, sqls in short.items()} == {name: len(sqls) for name, sqls in long.items()}, (
        "a step's cost must not depend on the plan's length"
    )
    assert set(long) <= set(CEILINGS), f"statements outside the claim, finish and dispatch: {long.get('other')}"
    for name, ceiling in CEILINGS.items():
        assert len(long.get(name, [])) <= ceiling, f"{name}:\n" + "\n".join(sql[:120] for sql in long.get(name, []))
    assert sum(len(sqls) for sqls in long.values()) <= GOAL
