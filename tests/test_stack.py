"""The real stack: a Celery worker on Redis, the ASGI server with websockets, and /healthz over both."""

import asyncio

import pytest
import websockets
from django.contrib.auth.models import User
from django.test import Client
from websockets.exceptions import InvalidStatus

from planning.models import Goal, Plan
from tests.conftest import make_user, run_async, wait_until


def test_a_submitted_goal_round_trips_through_a_real_celery_worker(celery_worker):
    from planning.demo import seed_demo

    seed_demo()
    alice = User.objects.get(username="alice")
    client = Client()
    client.force_login(alice)
    response = client.post("/api/goals", {"text": "Return 2 Aviator sunglasses", "planner": "playbook"}, content_type="application/json")
    assert response.status_code == 201
    plan_id = response.json()["plan_id"]
    plan = wait_until(
        lambda: Plan.objects.filter(pk=plan_id).exclude(status=Plan.Status.PLANNING).first(), message="the worker to plan the goal"
    )
    assert plan.status == Plan.Status.AWAITING_APPROVAL
    assert [s.tool for s in plan.steps.all()] == ["get_item", "return_item"]


def test_healthz_reports_database_redis_and_worker_ok(celery_worker, client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["database"] == "ok" and body["redis"] == "ok" and body["workers"] == "ok"
    assert body["worker_count"] >= 1


def test_healthz_reports_degraded_when_redis_is_unreachable(client, db, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["redis"].startswith("error")


async def _handshake(url: str, **kwargs):
    async with websockets.connect(url, open_timeout=10, **kwargs) as socket:
        return await asyncio.wait_for(socket.recv(), timeout=10)


def _ws_url(http_url: str, plan_id: int) -> str:
    return http_url.replace("http://", "ws://") + f"/ws/plans/{plan_id}/"


@pytest.fixture
def plan_on_server(transactional_db):
    alice = make_user("alice", "operator")
    goal = Goal.objects.create(text="Count <b>tickets</b>", requester=alice)
    return Plan.objects.create(goal=goal, status=Plan.Status.AWAITING_APPROVAL, revision=1, content_hash="ab" * 32)


def _session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


def test_an_anonymous_websocket_is_refused(asgi_server, plan_on_server):
    with pytest.raises(InvalidStatus) as refused:
        run_async(_handshake(_ws_url(asgi_server, plan_on_server.pk), origin=asgi_server))
    assert refused.value.response.status_code == 403


def test_a_user_without_view_permission_cannot_subscribe(asgi_server, plan_on_server):
    cookie = _session_cookie(make_user("nobody", None))
    with pytest.raises(InvalidStatus):
        run_async(_handshake(_ws_url(asgi_server, plan_on_server.pk), origin=asgi_server, additional_headers={"Cookie": cookie}))


def test_a_cross_origin_websocket_is_refused_even_with_a_session(asgi_server, plan_on_server):
    cookie = _session_cookie(plan_on_server.goal.requester)
    with pytest.raises(InvalidStatus):
        run_async(_handshake(_ws_url(asgi_server, plan_on_server.pk), origin="http://evil.example", additional_headers={"Cookie": cookie}))


def test_a_viewer_who_connects_gets_the_current_state(asgi_server, plan_on_server):
    cookie = _session_cookie(make_user("carol", "auditor"))
    fragment = run_async(_handshake(_ws_url(asgi_server, plan_on_server.pk), origin=asgi_server, additional_headers={"Cookie": cookie}))
    assert 'id="plan-live"' in fragment and "Awaiting approval" in fragment and "revision 1" in fragment


def test_the_served_page_loads_vendored_htmx(asgi_server, plan_on_server):
    import urllib.request

    with urllib.request.urlopen(asgi_server + "/static/vendor/htmx-2.0.11.min.js", timeout=10) as response:
        assert response.status == 200
        assert b"htmx" in response.read(2000)
