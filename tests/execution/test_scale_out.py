"""Two separate worker processes on one Redis share the work, and no step runs twice."""

import os
import subprocess

import pytest

from execution import engine
from planning.models import Plan, StepAttempt
from project.devstack import worker_command
from tests.conftest import ROOT, make_user, stop_process, subprocess_env, wait_until
from tests.fixtures.plans import approved_plan, step
from tests.tools import effects


@pytest.fixture
def two_workers(transactional_db, settings, tmp_path):
    """Workers that only listen to a queue of their own, so no other worker can take the work."""
    from project.celery import app

    queue = f"steps-scale-out-{os.getpid()}"
    settings.COUNTERSIGN_QUEUE_STEPS = queue
    env = subprocess_env(COUNTERSIGN_TOOL_MODULES="tests.tools", COUNTERSIGN_QUEUE_STEPS=queue)
    processes = []
    for name in ("machine-a", "machine-b"):
        log = (tmp_path / f"{name}.log").open("w")
        processes.append(
            subprocess.Popen(
                worker_command(hostname=f"{name}@%h", queues=queue, concurrency=2),
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    wait_until(
        lambda: sum(1 for reply in app.control.ping(timeout=0.5) for host in reply if host.startswith("machine-")) == 2,
        timeout=60,
        message="both workers",
    )
    yield processes
    for process in processes:
        stop_process(process)


def test_two_worker_processes_share_the_work_and_nothing_runs_twice(two_workers):
    people = (make_user("alice", "operator"), make_user("bob", "approver"))
    plans = [
        approved_plan(people, [step(f"s{i}", "record_effect", {"label": f"scale-{n}-{i}", "seconds": 0.2}) for i in range(6)])
        for n in range(4)
    ]
    for plan in plans:
        engine.plan_run(plan_id=plan.pk, actor=people[0])
    ids = [plan.pk for plan in plans]
    wait_until(
        lambda: Plan.objects.filter(pk__in=ids, status=Plan.Status.SUCCEEDED).count() == 4, timeout=60, message="all plans to finish"
    )
    attempts = list(StepAttempt.objects.filter(step__plan_id__in=ids).values_list("worker", flat=True))
    assert len(attempts) == 24, "one attempt per step"
    worker_processes = {worker for worker in attempts}
    parents = {
        subprocess.run(["ps", "-o", "ppid=", "-p", worker.rsplit(":", 1)[1]], capture_output=True, text=True).stdout.strip()
        for worker in worker_processes
    }
    assert {str(p.pid) for p in two_workers} == parents, "both worker processes (machines) took steps"
    scale_effects = [e for e in effects() if e["label"].startswith("scale-")]
    assert len(scale_effects) == 24 and len({e["label"] for e in scale_effects}) == 24, "every side effect happened exactly once"
