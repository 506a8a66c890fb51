"""Real workers with failpoints armed, on a Redis of their own.

The fault tests start and kill their own Celery workers, and stop and start their broker, so they get an
embedded redis-server on a free port: the session's shared worker (tests/conftest.py) never sees their
messages, and restarting the broker disturbs nobody else. The test process sends to it through a Celery
app of its own, made current for the test (core.jobs sends through `current_app`)."""

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis
from celery import Celery
from django.conf import settings as django_settings

import tests.faults.tools  # noqa: F401  (the fault tools, registered in this process too)
from project.celery import app as project_app
from project.devstack import free_port, redis_server_binary, wait_for_port, worker_command
from tests.conftest import ROOT, subprocess_env

# Deadlines short enough for a test, the same in the workers and in the test process's reconciler.
FAST = {
    "COUNTERSIGN_DEADLINE_GRACE_S": 1,
    "COUNTERSIGN_QUEUED_DEADLINE_S": 4.0,
    "COUNTERSIGN_AFTERMATH_DEADLINE_S": 3.0,
    "COUNTERSIGN_PLANNING_DEADLINE_S": 5.0,
    "COUNTERSIGN_MAX_ATTEMPTS": 2,
    "COUNTERSIGN_RETRY_BACKOFF_S": 0.2,
    "COUNTERSIGN_MAX_REPLANS": 1,
}


class RedisServer:
    """An embedded redis-server that a test can stop and start again on the same port (empty each time,
    as after a crash without persistence)."""

    def __init__(self):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="countersign-faults-redis-")
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = None

    def start(self):
        self.process = subprocess.Popen(
            [redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL,
        )
        wait_for_port(self.port, process=self.process)

    def stop(self):
        self.process.kill()
        self.process.wait()


@pytest.fixture(scope="session")
def fault_redis():
    server = RedisServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def fault_broker(fault_redis, settings):
    """The test process queues on the fault Redis and reconciles with the workers' short deadlines."""
    for name, value in FAST.items():
        setattr(settings, name, value)
    app = Celery("countersign-faults", set_as_current=False)
    app.conf.update(
        broker_url=fault_redis.url,
        task_routes=django_settings.CELERY_TASK_ROUTES,
        task_serializer="json",
        broker_connection_retry_on_startup=True,
        broker_transport_options={"visibility_timeout": 3600},
    )
    app.set_current()
    yield app
    project_app.set_current()


class FaultWorker:
    """One real worker process group, started with or without failpoints, killed like a lost machine."""

    def __init__(self, app, redis_url: str, log_dir: Path):
        self.app, self.redis_url, self.log_dir = app, redis_url, log_dir
        self.marker = log_dir / "failpoint-fired"
        self.process = None
        self.starts = 0

    def start(self, failpoints: str = "") -> "FaultWorker":
        self.starts += 1
        hostname = f"fault-{os.getpid()}-{self.starts}@%h"
        env = subprocess_env(
            REDIS_URL=self.redis_url,
            COUNTERSIGN_TOOL_MODULES="tests.tools,tests.faults.tools",
            COUNTERSIGN_FAILPOINTS=failpoints,
            COUNTERSIGN_FAILPOINT_MARKER=str(self.marker),
            OPENAI_BASE_URL="",
            OPENAI_API_KEY="",
            **{name: str(value) for name, value in FAST.items()},
        )
        log = self.log_dir / f"worker-{self.starts}.log"
        self.process = subprocess.Popen(
            worker_command(hostname=hostname, concurrency=2, loglevel="INFO"),
            cwd=ROOT,
            env=env,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        expected = hostname.replace("%h", os.uname().nodename)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"The fault worker exited while starting:\n{log.read_text()}")
            try:
                if any(expected in reply for reply in self.app.control.ping(destination=[expected], timeout=0.5)):
                    return self
            except redis.exceptions.ConnectionError:
                continue  # a pooled connection to the broker before its restart; the next one is fresh
        raise RuntimeError(f"The fault worker did not answer a ping in 60 s:\n{log.read_text()}")

    def kill(self) -> None:
        """SIGKILL the whole worker (parent and children), as when its machine goes away."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def restart(self) -> "FaultWorker":
        self.kill()
        return self.start()

    def running(self) -> "FaultWorker":
        """Start it again if it died, as a supervisor (systemd, Kubernetes) would."""
        return self if self.process and self.process.poll() is None else self.start()

    def fired(self) -> bool:
        return self.marker.exists()


@pytest.fixture
def fault_worker(fault_broker, fault_redis, transactional_db, tmp_path):
    # Messages left by an earlier test name rows that no longer exist: each test starts on an empty broker.
    redis.Redis.from_url(fault_redis.url).flushdb()
    worker = FaultWorker(fault_broker, fault_redis.url, tmp_path)
    yield worker
    worker.kill()
