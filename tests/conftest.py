"""Shared fixtures: the demo roles' users, a fake OpenAI server, and real subprocesses (Celery worker,
ASGI server) that work on the test database over real connections."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection

import tests.tools  # noqa: F401  (registers the test-only tools in this process too)
from project.devstack import worker_command
from tests.fakes.openai_server import FakeOpenAI

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _flush_retrying_deadlocks():
    """A transactional test ends with TRUNCATE of every table. The ASGI server may still be answering the
    closed page's last request (a status poll, a websocket render): one SELECT joining tables takes their
    locks one by one, TRUNCATE takes them in its own order, and PostgreSQL breaks the deadlock by aborting
    one side. When it aborts the flush, flushing again succeeds once the request is done."""
    from django.core.management.commands import flush
    from django.db import OperationalError

    handle = flush.Command.handle

    def handle_retrying(self, **options):
        for attempt in range(5):
            try:
                return handle(self, **options)
            except Exception as error:  # CommandError wrapping the OperationalError
                if attempt == 4 or not isinstance(error.__cause__, OperationalError) or "deadlock" not in str(error.__cause__):
                    raise

    flush.Command.handle = handle_retrying


_flush_retrying_deadlocks()


def make_user(username: str, role: str | None) -> User:
    """The user (the demo data may already hold one of that name), in the role's group."""
    user = User.objects.filter(username=username).first() or User.objects.create_user(
        username=username, password=f"pw-{username}-123", email=f"{username}@example.com"
    )
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def alice(db):
    return make_user("alice", "operator")


@pytest.fixture
def bob(db):
    return make_user("bob", "approver")


@pytest.fixture
def carol(db):
    return make_user("carol", "auditor")


@pytest.fixture
def dave(db):
    """A second operator."""
    return make_user("dave", "operator")


@pytest.fixture
def nobody(db):
    """Logged in, but in no group."""
    return make_user("nobody", None)


def client_for(client_class, user):
    client = client_class()
    client.force_login(user)
    return client


@pytest.fixture
def alice_client(alice, client):
    client.force_login(alice)
    return client


@pytest.fixture
def bob_client(bob):
    from django.test import Client

    return client_for(Client, bob)


@pytest.fixture
def demo_data(db):
    from planning.demo import seed_demo

    seed_demo()


# ---- fake OpenAI -----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def fake_openai_server():
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def fake_openai(fake_openai_server, settings):
    """The LLM configured to talk to the fake server; each test starts with an empty script."""
    fake_openai_server.reset()
    settings.OPENAI_BASE_URL = fake_openai_server.base_url
    settings.OPENAI_API_KEY = "sk-test"
    settings.OPENAI_MAX_RETRIES = 0
    settings.OPENAI_TIMEOUT_S = 5
    yield fake_openai_server
    fake_openai_server.reset()


@pytest.fixture
def no_llm(settings):
    settings.OPENAI_BASE_URL = ""
    settings.OPENAI_API_KEY = ""


# ---- real subprocesses on the test database --------------------------------------------------------


def database_url_for_subprocesses() -> str:
    """A DATABASE_URL for the test database, so subprocesses open the same one as the tests."""
    config = connection.settings_dict
    if config["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{config['NAME']}"
    user = config.get("USER") or ""
    password = f":{config['PASSWORD']}" if config.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    port = f":{config['PORT']}" if config.get("PORT") else ""
    return f"postgres://{auth}{config.get('HOST') or '127.0.0.1'}{port}/{config['NAME']}"


def subprocess_env(**extra) -> dict:
    env = dict(os.environ)
    env.update({"DATABASE_URL": database_url_for_subprocesses(), "DEBUG": "false", "PYTHONUNBUFFERED": "1"})
    env.update({k: v for k, v in extra.items() if v is not None})
    return env


def stop_process(process: subprocess.Popen, timeout: float = 15) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, django_db_blocker, fake_openai_server, tmp_path_factory):
    """A real Celery worker (prefork, 2 processes) consuming from the real Redis broker."""
    from project.celery import app

    log = tmp_path_factory.mktemp("worker") / "worker.log"
    # Tasks queued by earlier runs or tests name rows that no longer exist; start from an empty queue.
    app.control.purge()
    with django_db_blocker.unblock():
        env = subprocess_env(
            OPENAI_BASE_URL=fake_openai_server.base_url,
            OPENAI_API_KEY="sk-test",
            OPENAI_MAX_RETRIES="0",
            COUNTERSIGN_TOOL_MODULES="tests.tools",
            COUNTERSIGN_MAX_ATTEMPTS="2",
            COUNTERSIGN_RETRY_BACKOFF_S="0.2",
            EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend",
            # Pages served by tests themselves (tests/execution/test_provenance.py) may be fetched.
            COUNTERSIGN_HTTP_ALLOWLIST="127.0.0.1",
        )
    hostname = f"test-worker-{os.getpid()}@%h"
    process = subprocess.Popen(
        worker_command(hostname=hostname, concurrency=2, loglevel="INFO"),
        cwd=ROOT,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    expected = hostname.replace("%h", os.uname().nodename)
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"Celery worker exited early:\n{log.read_text()}")
        if any(expected in reply for reply in app.control.ping(timeout=0.5)):
            break
    else:
        stop_process(process)
        raise RuntimeError(f"Celery worker did not answer a ping in 60 s:\n{log.read_text()}")
    process.log_path = log
    process.hostname = expected
    yield process
    stop_process(process)


@pytest.fixture
def celery_worker(celery_worker_process, transactional_db):
    """Tests that hand work to the worker commit their data, so the worker's connection sees it.
    Afterwards the worker must be idle before the database is flushed: work a test set off (an answer,
    a replan, a requeued step) would otherwise write while the tables are being truncated."""
    yield celery_worker_process
    wait_for_idle_worker(celery_worker_process.hostname)


def wait_for_idle_worker(hostname: str, timeout: float = 30.0) -> None:
    import redis
    from django.conf import settings

    from project.celery import app
    from project.devstack import ALL_QUEUES

    broker = redis.Redis.from_url(settings.REDIS_URL)
    inspector = app.control.inspect(destination=[hostname], timeout=1.0)
    deadline, quiet = time.monotonic() + timeout, 0
    while time.monotonic() < deadline and quiet < 2:
        queued = sum(broker.llen(queue) for queue in ALL_QUEUES.split(","))
        busy = [inspector.active() or {}, inspector.reserved() or {}, inspector.scheduled() or {}]
        idle = queued == 0 and not any(tasks for replies in busy for tasks in replies.values())
        quiet = quiet + 1 if idle else 0


@pytest.fixture(scope="session")
def asgi_server(django_db_setup, django_db_blocker, tmp_path_factory):
    """The real ASGI app under uvicorn (HTTP + websockets) on a free port; yields its base URL."""
    from project.devstack import free_port, wait_for_port

    port = free_port()
    log = tmp_path_factory.mktemp("asgi") / "uvicorn.log"
    with django_db_blocker.unblock():
        env = subprocess_env(COUNTERSIGN_TOOL_MODULES="tests.tools")
    process = subprocess.Popen(
        [str(BIN / "uvicorn"), "project.asgi:application", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(port, timeout=60, process=process)
    except SystemExit as error:
        raise RuntimeError(f"{error}\n{log.read_text()}") from None
    yield f"http://127.0.0.1:{port}"
    stop_process(process)


def run_async(coroutine):
    """Run a coroutine to completion on a fresh event loop in its own thread (the browser tests keep an
    event loop attached to the main thread, where asyncio.run would refuse to start)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def wait_until(predicate, *, timeout: float = 20.0, interval: float = 0.05, message: str = "condition"):
    """Poll a predicate that reads real state (the database, a queue) until it holds: no fixed sleeps."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"Timed out after {timeout:g} s waiting for {message}")
