"""Outages are on screen: a banner on every page when no worker answers or Redis is down (the /healthz
checks), "planning is taking longer than usual" on a slow draft, and `make run` refuses a busy port."""

import socket
import subprocess
import sys
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from planning.models import Goal, Plan
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_status():
    cache.clear()
    yield
    cache.clear()


def test_every_page_polls_the_banner_and_it_says_no_worker_answers(alice_client):
    assert 'hx-get="/system-status/"' in alice_client.get("/").content.decode()
    # No worker runs in this test: Redis answers, nobody replies to the ping.
    banner = alice_client.get("/system-status/").content.decode()
    assert "No worker is answering" in banner and 'role="alert"' in banner


def test_the_banner_says_when_redis_is_down(alice_client, settings):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    settings.REDIS_URL = f"redis://127.0.0.1:{closed_port}/0"
    assert "Redis is unreachable" in alice_client.get("/system-status/").content.decode()


def test_a_plan_drafting_for_long_says_planning_takes_longer_than_usual(alice, alice_client, settings):
    settings.COUNTERSIGN_PLANNING_SLOW_S = 20
    plan = Plan.objects.create(goal=Goal.objects.create(text="Slow goal", requester=alice))
    assert "taking longer than usual" not in alice_client.get(f"/plans/{plan.pk}/").content.decode()
    Plan.objects.filter(pk=plan.pk).update(updated_at=timezone.now() - timedelta(seconds=60))
    assert "Planning is taking longer than usual" in alice_client.get(f"/plans/{plan.pk}/").content.decode()


def test_make_run_refuses_a_busy_port_loudly(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "project.devstack", "run"],
            cwd=ROOT,
            env={"PATH": "/usr/bin:/bin", "PORT": str(port), "DATABASE_URL": f"sqlite:///{tmp_path / 'x.sqlite3'}"},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2 and f"Port {port} is already in use" in result.stderr
