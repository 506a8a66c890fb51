"""Countersign benchmarks: `make bench`.

Each benchmark runs the real stack (Celery workers on Redis, uvicorn with websockets, the database in
DATABASE_URL or a fresh SQLite file) and reports against a baseline measured in the same run, because the
machine is shared and noisy. Results: a table on stdout, JSON in bench/results/, a summary with the
machine described in docs/performance.md. Benchmarks never fail the build; missed goals are reported.
"""

import asyncio
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT))

from project.devstack import worker_command  # noqa: E402  (needs the path above)


def bench_database_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        base, _, name = url.rpartition("/")
        return f"{base}/{name.split('?')[0]}_bench"
    return f"sqlite:///{ROOT / 'var' / 'bench.sqlite3'}"


def prepare_environment() -> None:
    os.environ["DATABASE_URL"] = bench_database_url()
    os.environ.setdefault("SECRET_KEY", "bench-only-countersign-secret-key-0123456789abcdefghijklmnop")
    os.environ["COUNTERSIGN_TOOL_MODULES"] = "tests.tools,tests.faults.tools"
    os.environ["DJANGO_SETTINGS_MODULE"] = "project.settings"
    os.environ["COUNTERSIGN_MAX_STEPS"] = "1200"
    os.environ["ALLOWED_HOSTS"] = "localhost,127.0.0.1,testserver"
    os.environ.pop("OPENAI_BASE_URL", None)
    os.environ.pop("OPENAI_API_KEY", None)
    if os.environ["DATABASE_URL"].startswith("postgres"):
        import psycopg

        admin_url = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/postgres"
        name = os.environ["DATABASE_URL"].rsplit("/", 1)[1]
        with psycopg.connect(admin_url, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            connection.execute(f'CREATE DATABASE "{name}"')
    else:
        (ROOT / "var" / "bench.sqlite3").unlink(missing_ok=True)


class Processes:
    def __init__(self):
        self.running: list[subprocess.Popen] = []

    def start(self, args: list[str], name: str) -> subprocess.Popen:
        log = open(ROOT / "var" / f"bench-{name}.log", "w")  # noqa: SIM115 (closed with the process)
        process = subprocess.Popen(args, cwd=ROOT, env=dict(os.environ), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.running.append(process)
        return process

    def worker(self, name: str, *, pool: str = "prefork", concurrency: int = 2) -> subprocess.Popen:
        from project.celery import app

        hostname = f"{name}@bench"
        process = self.start(
            worker_command(hostname=hostname, pool=pool, concurrency=concurrency),
            name,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(hostname in reply for reply in app.control.ping(timeout=0.5)):
                return process
        raise RuntimeError(f"worker {name} did not start")

    def stop(self, process: subprocess.Popen | None = None) -> None:
        for each in [process] if process else list(self.running):
            if each.poll() is None:
                each.terminate()
                try:
                    each.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    each.kill()
            if each in self.running:
                self.running.remove(each)


def people():
    from tests.conftest import make_user

    return make_user("alice", "operator"), make_user("bob", "approver")


def make_plan(steps: list[dict], goal: str):
    """An approved plan with these steps (validation with a high step limit, so long chains fit)."""
    from planning import services
    from planning.models import Goal, Plan
    from planning.review import plan_decision_record
    from planning.validation import validate_plan

    alice, bob = people()
    plan = Plan.objects.create(goal=Goal.objects.create(text=goal, requester=alice), status=Plan.Status.AWAITING_APPROVAL)
    services.write_revision(plan, validate_plan({"steps": steps}, max_steps=1000), author=None, planner="human", reason="benchmark")
    plan_decision_record(plan_id=plan.pk, actor=bob, revision=plan.revision, content_hash=plan.content_hash, decision="approved")
    return Plan.objects.get(pk=plan.pk)


def step(key, tool, args=None, depends_on=()):
    return {"key": key, "title": key, "tool": tool, "args": args or {}, "depends_on": list(depends_on)}


def run_and_wait(plan, timeout: float = 600) -> float:
    from execution import engine
    from planning.models import Plan

    started = time.perf_counter()
    engine.plan_run(plan_id=plan.pk, actor=people()[0])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = Plan.objects.values_list("status", flat=True).get(pk=plan.pk)
        if status in {Plan.Status.SUCCEEDED, Plan.Status.FAILED, Plan.Status.CANCELLED}:
            return time.perf_counter() - started
        time.sleep(0.02)
    raise RuntimeError(f"plan {plan.pk} did not finish within {timeout} s")


def pct(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1)))))]


# ---- the benchmarks -----------------------------------------------------------------------------------


def bench_fanout(procs: Processes) -> dict:
    from project.celery import app

    worker = procs.worker("fanout", pool="threads", concurrency=17)
    try:
        app.send_task("countersign.ping").get(timeout=10)  # a warm broker connection, as a web process has
        parallel = [step(f"s{i}", "sleep_io", {"seconds": 1.0}) for i in range(16)] + [
            step("join", "noop", depends_on=[f"s{i}" for i in range(16)])
        ]
        chained = [step(f"s{i}", "sleep_io", {"seconds": 1.0}, depends_on=[f"s{i - 1}"] if i else []) for i in range(16)] + [
            step("join", "noop", depends_on=["s15"])
        ]
        fan_time = run_and_wait(make_plan(parallel, "fan-out"))
        chain_time = run_and_wait(make_plan(chained, "chain"))
    finally:
        procs.stop(worker)
    critical_path = 1.0
    return {
        "fanout_wall_s": round(fan_time, 3),
        "chain_wall_s": round(chain_time, 3),
        "critical_path_s": critical_path,
        "wall_over_critical_path": round(fan_time / critical_path, 3),
        "speedup_vs_chain": round(chain_time / fan_time, 2),
        "goal": "wall / critical path <= 1.15",
        "met": fan_time / critical_path <= 1.15,
    }


def bench_overhead(procs: Processes) -> dict:
    from planning.models import Step
    from project.celery import app

    worker = procs.worker("overhead", pool="prefork", concurrency=1)
    try:
        # Baseline: a raw Celery round trip on the same Redis (a registered no-op task and its result).
        raw = []
        for _ in range(200):
            started = time.perf_counter()
            app.send_task("countersign.ping").get(timeout=10)
            raw.append(time.perf_counter() - started)
        plan = make_plan([step(f"s{i}", "noop", depends_on=[f"s{i - 1}"] if i else []) for i in range(200)], "overhead chain")
        total = run_and_wait(plan)
        rows = list(Step.objects.filter(plan=plan).order_by("position").values_list("started_at", "finished_at"))
    finally:
        procs.stop(worker)
    per_step = [(rows[i][1] - rows[i - 1][1]).total_seconds() for i in range(1, len(rows))]
    ratio = statistics.median(per_step) / statistics.median(raw)
    return {
        "steps": 200,
        "total_s": round(total, 3),
        "per_step_median_ms": round(statistics.median(per_step) * 1000, 2),
        "per_step_p95_ms": round(pct(per_step, 0.95) * 1000, 2),
        "raw_celery_median_ms": round(statistics.median(raw) * 1000, 2),
        "raw_celery_p95_ms": round(pct(raw, 0.95) * 1000, 2),
        "median_ratio_vs_raw": round(ratio, 2),
        "goal": "per-step median <= 3x raw Celery round trip",
        "met": ratio <= 3.0,
    }


def bench_live_progress(procs: Processes, *, subscribers: int = 20) -> dict:
    """Commit-to-screen latency of a transition with `subscribers` pages open on the plan (half the
    requester, half an approver: two kinds of viewer), measured to the last page that receives it."""
    import websockets
    from django.db import transaction
    from django.test import Client

    from planning import broadcast
    from planning.models import Step
    from project.devstack import free_port, wait_for_port

    port = free_port()
    server = procs.start(
        [str(BIN / "uvicorn"), "project.asgi:application", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"], "uvicorn"
    )
    wait_for_port(port, timeout=60, process=server)
    plan = make_plan([step("s1", "noop")], "live progress")
    cookies = []
    for user in people()[:2]:
        client = Client()
        client.force_login(user)
        cookies.append(f"sessionid={client.cookies['sessionid'].value}")
    count = 100
    received: list[list[float]] = [[] for _ in range(subscribers)]
    ready = threading.Barrier(subscribers + 1, timeout=60)

    async def listen(index: int):
        async with websockets.connect(
            f"ws://127.0.0.1:{port}/ws/plans/{plan.pk}/",
            origin=f"http://127.0.0.1:{port}",
            additional_headers={"Cookie": cookies[index % 2]},
            open_timeout=30,
        ) as socket:
            await socket.recv()
            await asyncio.get_running_loop().run_in_executor(None, ready.wait)
            while len(received[index]) < count:
                message = await asyncio.wait_for(socket.recv(), timeout=30)
                if "bench-transition" in message:
                    received[index].append(time.perf_counter())

    listeners = [threading.Thread(target=lambda i=i: asyncio.run(listen(i)), daemon=True) for i in range(subscribers)]
    for listener in listeners:
        listener.start()
    ready.wait()
    committed: list[float] = []
    for index in range(count):
        with transaction.atomic():
            Step.objects.filter(plan=plan, key="s1").update(note=f"transition {index}")
            transaction.on_commit(lambda: committed.append(time.perf_counter()))
            broadcast.announce(plan.pk, steps=["s1"], log=f"bench-transition {index}")
        # One transition at a time, like a chain: the next commits once every page has this one.
        while any(len(r) <= index for r in received) and any(listener.is_alive() for listener in listeners):
            time.sleep(0.001)
    for listener in listeners:
        listener.join(timeout=30)
    procs.stop(server)
    complete = min(len(r) for r in received)
    last = [(max(r[i] for r in received) - committed[i]) * 1000 for i in range(complete)]
    first_page = [(received[0][i] - committed[i]) * 1000 for i in range(complete)]
    return {
        "subscribers": subscribers,
        "transitions": complete,
        "p50_ms": round(statistics.median(last), 2),
        "p95_ms": round(pct(last, 0.95), 2),
        "one_page_p95_ms": round(pct(first_page, 0.95), 2),
        "goal": f"p95 <= 50 ms to the last of {subscribers} pages",
        "met": complete == count and pct(last, 0.95) <= 50,
    }


def bench_plan_page() -> dict:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    client.force_login(people()[0])
    results = {}
    for size in (10, 100, 500):
        plan = make_plan([step(f"s{i}", "noop", depends_on=[f"s{i - 1}"] if i % 10 else []) for i in range(size)], f"page {size}")
        timings = []
        for _ in range(5):
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                response = client.get(f"/plans/{plan.pk}/")
                timings.append(time.perf_counter() - started)
            assert response.status_code == 200
        results[f"steps_{size}"] = {"median_ms": round(statistics.median(timings) * 1000, 1), "queries": len(queries)}
    results["queries_constant"] = len({v["queries"] for k, v in results.items() if k.startswith("steps_")}) == 1
    results["goal"] = "queries constant; 100 steps <= 60 ms, 500 steps <= 200 ms"
    results["met"] = results["queries_constant"] and results["steps_100"]["median_ms"] <= 60 and results["steps_500"]["median_ms"] <= 200
    return results


def bench_playbooks() -> dict:
    from planning.demo import ONCALL_GOAL, seed_demo
    from planning.planner import draft_with_playbook

    seed_demo()
    goals = [
        ONCALL_GOAL,
        "Do you have any round sunglasses in stock under $100?",
        "Return 2 Aviator sunglasses",
        "Purchase 3 Wayfarer sunglasses for customer Alice",
        "I want to buy 3 pairs of classic sunglasses and 1 pair of aviator sunglasses",
    ]
    timings = {}
    for goal in goals:
        runs = []
        for _ in range(5):
            started = time.perf_counter()
            draft_with_playbook(goal)
            runs.append(time.perf_counter() - started)
        timings[goal[:40]] = round(statistics.median(runs) * 1000, 1)
    slowest = max(timings.values())
    return {"median_ms_per_goal": timings, "slowest_ms": slowest, "goal": "each demo goal drafted in < 1000 ms", "met": slowest < 1000}


def bench_sandbox() -> dict:
    from sandbox import runner
    from sandbox.runner import run_code

    assert runner.unavailable_reason() is None, runner.unavailable_reason()
    code = "answer_text = 'ok'\nSTATUS = 'success'"
    bare, cold, warm = [], [], []
    for _ in range(20):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True)
        bare.append(time.perf_counter() - started)
    for _ in range(20):
        started = time.perf_counter()
        result = run_code(code, tables={}, warm=False)
        cold.append(time.perf_counter() - started)
        assert result.status == "ok" and result.isolation["template"] is False
    assert runner.warm_up()
    for _ in range(50):
        started = time.perf_counter()
        result = run_code(code, tables={})
        warm.append(time.perf_counter() - started)
        assert result.status == "ok" and result.isolation["template"] is True
    bare_ms, cold_ms, warm_ms = (statistics.median(runs) * 1000 for runs in (bare, cold, warm))
    return {
        "bare_python_median_ms": round(bare_ms, 1),
        "run_code_cold_median_ms": round(cold_ms, 1),
        "run_code_cold_p95_ms": round(pct(cold, 0.95) * 1000, 1),
        "cold_ratio_vs_bare": round(cold_ms / bare_ms, 2),
        "run_code_warm_median_ms": round(warm_ms, 1),
        "run_code_warm_p95_ms": round(pct(warm, 0.95) * 1000, 1),
        "warm_ratio_vs_bare": round(warm_ms / bare_ms, 2),
        "goal": "cold median <= 50 ms, warm median <= 15 ms",
        "met": cold_ms <= 50 and warm_ms <= 15,
    }


def bench_load(procs: Processes) -> dict:
    from execution import engine
    from planning.models import Plan, Step, StepAttempt
    from tests.tools import effects

    workers = [procs.worker("load-a", pool="prefork", concurrency=2), procs.worker("load-b", pool="prefork", concurrency=2)]
    try:
        plans = [make_plan([step(f"s{i}", "record_effect", {"label": f"load-{n}-{i}"}) for i in range(10)], f"load {n}") for n in range(50)]
        alice = people()[0]
        started = time.perf_counter()
        for plan in plans:
            engine.plan_run(plan_id=plan.pk, actor=alice)
        ids = [plan.pk for plan in plans]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if not Plan.objects.filter(pk__in=ids).exclude(status__in=[Plan.Status.SUCCEEDED, Plan.Status.FAILED]).exists():
                break
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
    finally:
        for worker in workers:
            procs.stop(worker)
    steps = Step.objects.filter(plan_id__in=ids).count()
    attempts = StepAttempt.objects.filter(step__plan_id__in=ids).count()
    executed = len([e for e in effects() if e["label"].startswith("load-")])
    workers_used = len(set(StepAttempt.objects.filter(step__plan_id__in=ids).values_list("worker", flat=True)))
    return {
        "plans": 50,
        "steps": steps,
        "finished_plans": Plan.objects.filter(pk__in=ids, status=Plan.Status.SUCCEEDED).count(),
        "wall_s": round(elapsed, 2),
        "steps_per_s": round(steps / elapsed, 1),
        "side_effects": executed,
        "attempts": attempts,
        "worker_processes_used": workers_used,
        "no_step_twice": executed == steps and attempts == steps,
        "met": executed == steps == attempts == 500,
    }


def bench_curves(procs: Processes) -> dict:
    """Issue 19's scaling curves: per-step overhead of a chain at 10, 100 and 1,000 steps per plan (one
    prefork worker process), and throughput at 1, 10 and 50 concurrent plans of 10 independent steps (two
    worker processes of two slots). Flat means the cost of a step does not grow with the plan's length,
    and throughput does not fall as plans are added."""
    from execution import engine
    from planning.models import Plan, Step

    results: dict = {}
    worker = procs.worker("curves-chain", pool="prefork", concurrency=1)
    try:
        for length in (10, 100, 1000):
            plan = make_plan([step(f"s{i}", "noop", depends_on=[f"s{i - 1}"] if i else []) for i in range(length)], f"chain {length}")
            run_and_wait(plan, timeout=1800)
            rows = list(Step.objects.filter(plan=plan).order_by("position").values_list("finished_at", flat=True))
            gaps = [(rows[i] - rows[i - 1]).total_seconds() for i in range(1, len(rows))]
            results[f"chain_{length}_per_step_ms"] = round(statistics.median(gaps) * 1000, 2)
    finally:
        procs.stop(worker)
    workers = [procs.worker("curves-a", pool="prefork", concurrency=2), procs.worker("curves-b", pool="prefork", concurrency=2)]
    try:
        for count in (1, 10, 50):
            plans = [make_plan([step(f"s{i}", "noop") for i in range(10)], f"throughput {count}/{n}") for n in range(count)]
            ids = [plan.pk for plan in plans]
            started = time.perf_counter()
            for plan in plans:
                engine.plan_run(plan_id=plan.pk, actor=people()[0])
            deadline = time.monotonic() + 900
            while time.monotonic() < deadline and Plan.objects.filter(pk__in=ids).exclude(status=Plan.Status.SUCCEEDED).exists():
                time.sleep(0.02)
            results[f"plans_{count}_steps_per_s"] = round(10 * count / (time.perf_counter() - started), 1)
    finally:
        for worker in workers:
            procs.stop(worker)
    results["chain_growth_1000_vs_10"] = round(results["chain_1000_per_step_ms"] / results["chain_10_per_step_ms"], 2)
    results["throughput_50_vs_10"] = round(results["plans_50_steps_per_s"] / results["plans_10_steps_per_s"], 2)
    flat = results["chain_growth_1000_vs_10"] <= 1.25 and results["throughput_50_vs_10"] >= 0.8
    results["goal"] = "flat: a 1,000-step chain's step costs <= 1.25x a 10-step chain's; 50 plans keep >= 0.8x the throughput of 10"
    results["met"] = flat
    return results


def bench_soak(procs: Processes, *, plans_count: int = 200, steps_per_plan: int = 10, kill_every_s: float = 4.0) -> dict:
    """Plans of idempotent reads and non-idempotent effects run on two workers while one of them is
    SIGKILLed (its whole process group, mid-task) every few seconds and started again, as a supervisor
    would. The reconciler (called here once a second, as beat would) must leave no plan stranded: each
    ends finished or waits for a person (an interrupted effect), and no effect ever happens twice."""
    from collections import Counter

    from django.conf import settings

    from approvals import audit
    from approvals.models import AuditEvent
    from execution import engine, reconcile
    from planning.models import Plan, Step
    from tests.tools import effects

    # Short deadlines so recovery is measured in seconds: the workers read them from the environment.
    fast = {"COUNTERSIGN_DEADLINE_GRACE_S": "2", "COUNTERSIGN_QUEUED_DEADLINE_S": "6", "COUNTERSIGN_AFTERMATH_DEADLINE_S": "10"}
    os.environ.update(fast)
    settings.COUNTERSIGN_DEADLINE_GRACE_S, settings.COUNTERSIGN_QUEUED_DEADLINE_S = 2, 6.0
    settings.COUNTERSIGN_AFTERMATH_DEADLINE_S = 10.0

    def plan_steps(n: int) -> list[dict]:
        kinds = [("fault_read", {"value": i}) if i % 2 else ("fault_effect", {"label": f"soak-{n}-{i}"}) for i in range(steps_per_plan)]
        # two parallel chains joined at the end, so kills land on running, queued and dispatching steps
        return [step(f"s{i}", tool, args, depends_on=[f"s{i - 2}"] if i >= 2 else ()) for i, (tool, args) in enumerate(kinds)]

    plans = [make_plan(plan_steps(n), f"soak {n}") for n in range(plans_count)]
    ids = [plan.pk for plan in plans]
    alice = people()[0]
    workers = {name: procs.worker(name, concurrency=2) for name in ("soak-a", "soak-b")}
    kills: list[float] = []
    started = time.monotonic()
    for plan in plans:
        engine.plan_run(plan_id=plan.pk, actor=alice)

    def settled() -> set[int]:
        done = set(
            Plan.objects.filter(pk__in=ids, status__in=[Plan.Status.SUCCEEDED, Plan.Status.FAILED])
            .exclude(answer_text="")
            .values_list("pk", flat=True)
        )
        waiting = set(Step.objects.filter(plan_id__in=ids, status=Step.Status.INTERRUPTED).values_list("plan_id", flat=True))
        return done | waiting

    victim = 0
    last_kill = time.monotonic()
    deadline = started + 900
    try:
        while time.monotonic() < deadline and len(settled()) < len(ids):
            if time.monotonic() - last_kill >= kill_every_s and time.monotonic() - started < 240:
                name = ("soak-a", "soak-b")[victim % 2]
                victim += 1
                os.killpg(workers[name].pid, signal.SIGKILL)
                workers[name].wait()
                procs.running.remove(workers[name])
                kills.append(time.time())
                workers[name] = procs.worker(name, concurrency=2)
                last_kill = time.monotonic()
            reconcile.reconcile()
            time.sleep(1.0)
    finally:
        for worker in workers.values():
            procs.stop(worker)
        for key in fast:
            os.environ.pop(key, None)
    elapsed = time.monotonic() - started
    done = settled()
    counts = Counter(effect["label"] for effect in effects() if effect["label"].startswith("soak-"))
    recoveries = []
    for event in AuditEvent.objects.filter(plan_id__in=ids, action__in=["step.requeued", "step.interrupted", "plan.aftermath_requeued"]):
        before = [k for k in kills if k <= event.created_at.timestamp()]
        if before:
            recoveries.append(event.created_at.timestamp() - before[-1])
    waiting = Step.objects.filter(plan_id__in=ids, status=Step.Status.INTERRUPTED).values("plan_id").distinct().count()
    return {
        "plans": plans_count,
        "steps": plans_count * steps_per_plan,
        "worker_kills": len(kills),
        "finished_plans": Plan.objects.filter(pk__in=ids, status__in=[Plan.Status.SUCCEEDED, Plan.Status.FAILED]).count(),
        "waiting_for_a_person": waiting,
        "stranded": len(ids) - len(done),
        "repeated_side_effects": sum(1 for n in counts.values() if n > 1),
        "recoveries": len(recoveries),
        "recovery_p95_s": round(pct(recoveries, 0.95), 1) if recoveries else None,
        "wall_s": round(elapsed, 1),
        "audit_chain_ok": audit.verify()["ok"],
        "goal": "0 stranded, 0 repeated",
        "met": len(ids) == len(done) and all(n == 1 for n in counts.values()),
    }


def machine() -> dict:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
        platform.processor(),
    )
    memory_kb = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")))
    from django.db import connection

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(memory_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "database": connection.vendor,
        "redis": os.environ.get("REDIS_URL", ""),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def main() -> int:
    prepare_environment()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    RESULTS.mkdir(parents=True, exist_ok=True)
    procs = Processes()
    results: dict = {"machine": machine()}
    plan = [
        ("fanout", lambda: bench_fanout(procs)),
        ("overhead", lambda: bench_overhead(procs)),
        ("live_progress", lambda: bench_live_progress(procs)),
        ("plan_page", bench_plan_page),
        ("playbooks", bench_playbooks),
        ("sandbox", bench_sandbox),
        ("load", lambda: bench_load(procs)),
        ("curves", lambda: bench_curves(procs)),
        ("soak", lambda: bench_soak(procs)),
    ]
    only = set(sys.argv[1:])
    try:
        for name, run in plan:
            if only and name not in only:
                continue
            started = time.perf_counter()
            print(f"… {name}", flush=True)
            try:
                results[name] = run()
            except Exception as error:  # noqa: BLE001 (a broken benchmark is reported, the others still run)
                results[name] = {"error": f"{type(error).__name__}: {error}", "met": False}
            results[name]["bench_s"] = round(time.perf_counter() - started, 1)
            (RESULTS / f"{name}.json").write_text(json.dumps({"machine": results["machine"], name: results[name]}, indent=2, default=str))
    finally:
        procs.stop()
    print_table(results)
    (RESULTS / "latest.json").write_text(json.dumps(results, indent=2, default=str))
    if not only:
        write_performance_doc(results)
    return 0


BEGIN, END = "<!-- bench:begin (written by make bench) -->", "<!-- bench:end -->"


def write_performance_doc(results: dict) -> None:
    """Replace the measured block of docs/performance.md; the hand-written analysis around it stays."""
    doc = ROOT / "docs" / "performance.md"
    text = doc.read_text() if doc.exists() else f"# Performance\n\n{BEGIN}\n{END}\n"
    m = results["machine"]
    lines = [
        BEGIN,
        f"Measured {m['date']} on {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, Python {m['python']}, {m['database']}, Redis at {m['redis'] or 'embedded'}.",
        "",
        "| benchmark | figures | goal | met |",
        "| --- | --- | --- | --- |",
    ]
    for name, values in results.items():
        if name == "machine":
            continue
        if name == "plan_page":
            shown = "; ".join(
                f"{k.replace('steps_', '')} steps: {v['median_ms']} ms, {v['queries']} queries"
                for k, v in values.items()
                if isinstance(v, dict)
            )
            goal = values.get("goal", "queries constant")
        else:
            shown = "; ".join(f"{k}={v}" for k, v in values.items() if k not in {"goal", "met", "bench_s"} and not isinstance(v, dict))
            goal = values.get("goal", "")
        lines.append(f"| {name} | {shown} | {goal} | {'yes' if values.get('met') else 'no'} |")
    lines.append(END)
    start, end = text.find(BEGIN), text.find(END)
    text = text[:start] + "\n".join(lines) + text[end + len(END) :] if start != -1 and end != -1 else text + "\n" + "\n".join(lines) + "\n"
    doc.write_text(text)


def print_table(results: dict) -> None:
    print(f"\n{'benchmark':<14} {'result':<90} goal met")
    for name, values in results.items():
        if name == "machine":
            continue
        shown = ", ".join(f"{k}={v}" for k, v in values.items() if k not in {"goal", "met", "bench_s"} and not isinstance(v, dict))
        if name == "plan_page":
            shown = ", ".join(f"{k}: {v['median_ms']} ms/{v['queries']} q" for k, v in values.items() if isinstance(v, dict))
        print(f"{name:<14} {shown[:90]:<90} {values.get('met', '')}")


if __name__ == "__main__":
    sys.exit(main())
