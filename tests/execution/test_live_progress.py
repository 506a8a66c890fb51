"""Live progress over real websockets, and the run/gate API."""

import asyncio

import pytest
import websockets
from django.test import Client

from approvals.models import ApiToken
from execution import engine
from planning.models import Plan, Step
from tests.conftest import make_user, run_async, wait_until
from tests.fixtures.plans import approved_plan, step


@pytest.fixture
def people(transactional_db):
    return make_user("alice", "operator"), make_user("bob", "approver")


def cookie_for(user) -> str:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


async def _subscribe_and_collect(url, origin, cookie, until: str, trigger):
    async with websockets.connect(url, origin=origin, additional_headers={"Cookie": cookie}, open_timeout=10) as socket:
        first = await asyncio.wait_for(socket.recv(), timeout=10)
        await asyncio.get_running_loop().run_in_executor(None, trigger)
        received = []
        while True:
            message = await asyncio.wait_for(socket.recv(), timeout=15)
            received.append(message)
            if until in message:
                return first, received


def test_a_transition_reaches_a_subscriber(asgi_server, people):
    alice, bob = people
    plan = approved_plan(people, [step("g", "high_effect", {"label": "live"})])
    url = asgi_server.replace("http", "ws") + f"/ws/plans/{plan.pk}/"
    first, received = run_async(
        _subscribe_and_collect(
            url, asgi_server, cookie_for(bob), "Runtime approval needed", lambda: engine.plan_run(plan_id=plan.pk, actor=alice)
        )
    )
    assert 'id="step-live-g"' in first and "Pending" in first
    gate = next(m for m in received if "Runtime approval needed" in m)
    assert 'hx-swap-oob="true"' in gate and "Approve g" in gate, "bob may approve, so his fragment has the gate form"
    assert "&quot;label&quot;: &quot;live&quot;" in gate


def test_subscribers_get_fragments_rendered_for_their_own_permissions(asgi_server, people):
    alice, bob = people
    plan = approved_plan(people, [step("g", "high_effect", {"label": "live"})])
    url = asgi_server.replace("http", "ws") + f"/ws/plans/{plan.pk}/"
    _, received = run_async(
        _subscribe_and_collect(
            url, asgi_server, cookie_for(alice), "Runtime approval needed", lambda: engine.plan_run(plan_id=plan.pk, actor=alice)
        )
    )
    gate = next(m for m in received if "Runtime approval needed" in m)
    assert "Approve g" not in gate and "Waiting for an approver" in gate


def auth(user):
    return {"Authorization": f"Bearer {ApiToken.issue(user=user)}"}


def test_run_gates_and_decisions_through_the_api(people, celery_worker):
    alice, bob = people
    plan = approved_plan(people, [step("g", "high_effect", {"label": "api"}), step("after", "noop", depends_on=["g"])])
    client = Client()
    assert client.post(f"/api/plans/{plan.pk}/run", headers=auth(bob)).status_code == 403
    response = client.post(f"/api/plans/{plan.pk}/run", headers=auth(alice))
    assert response.status_code == 202 and response.json() == {"plan_id": plan.pk, "status": "running"}
    assert client.post(f"/api/plans/{plan.pk}/run", headers=auth(alice)).status_code == 409
    gates = wait_until(lambda: client.get("/api/gates?status=pending", headers=auth(bob)).json(), message="the gate to open")
    assert gates == [
        {
            "plan_id": plan.pk,
            "step_key": "g",
            "title": "high_effect g",
            "tool": "high_effect",
            "resolved_args": {"label": "api"},
            "risk": "high",
            "gate_hash": Step.objects.get(plan=plan, key="g").gate_hash,
            "goal": "Test goal",
            "provenance": {},
        }
    ]
    assert (
        client.post(
            f"/api/plans/{plan.pk}/steps/g/decision",
            {"approve": True, "gate_hash": gates[0]["gate_hash"]},
            content_type="application/json",
            headers=auth(alice),
        ).status_code
        == 403
    )
    decided = client.post(
        f"/api/plans/{plan.pk}/steps/g/decision",
        {"approve": True, "gate_hash": gates[0]["gate_hash"]},
        content_type="application/json",
        headers=auth(bob),
    )
    assert decided.status_code == 200 and decided.json()["status"] in {"queued", "running", "succeeded"}
    again = client.post(
        f"/api/plans/{plan.pk}/steps/g/decision",
        {"approve": True, "gate_hash": gates[0]["gate_hash"]},
        content_type="application/json",
        headers=auth(bob),
    )
    assert again.status_code == 409
    wait_until(lambda: Plan.objects.get(pk=plan.pk).status == Plan.Status.SUCCEEDED, message="the plan to finish")


def test_cancel_through_the_api(people):
    alice, _ = people
    plan = approved_plan(people, [step("s1", "noop")])
    response = Client().post(f"/api/plans/{plan.pk}/cancel", headers=auth(alice))
    assert response.status_code == 200 and response.json()["status"] == "cancelled"


def test_an_unapproved_plan_cannot_be_run_through_the_api(people):
    alice, _ = people
    from planning import services

    plan = approved_plan(people, [step("s1", "noop")])
    services.step_update(plan_id=plan.pk, actor=alice, revision=plan.revision, key="s1", changes={"args": {"value": 3}})
    response = Client().post(f"/api/plans/{plan.pk}/run", headers=auth(alice))
    assert response.status_code == 409 and "approved" in response.json()["detail"]
