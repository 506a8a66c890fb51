"""The plan websocket over a real server: it survives a quiet minute, a reconnect shows the current state,
and it closes once its user logs out or loses the role."""

import asyncio

import pytest
import websockets
from django.contrib.auth.models import Group
from django.test import Client

from execution import engine
from planning.consumers import NOT_ALLOWED, SESSION_GONE
from tests.conftest import make_user, run_async
from tests.fixtures.plans import approved_plan, step

IDLE_SECONDS = 60


@pytest.fixture
def people(transactional_db):
    return make_user("alice", "operator"), make_user("bob", "approver")


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def socket_url(asgi_server, plan) -> str:
    return asgi_server.replace("http", "ws") + f"/ws/plans/{plan.pk}/"


def connect(asgi_server, plan, client):
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    return websockets.connect(socket_url(asgi_server, plan), origin=asgi_server, additional_headers={"Cookie": cookie}, open_timeout=10)


async def in_thread(function):
    await asyncio.get_running_loop().run_in_executor(None, function)


def test_a_socket_idle_for_a_minute_still_receives_the_next_event(asgi_server, people):
    alice, bob = people
    plan = approved_plan(people, [step("g", "high_effect", {"label": "idle"})])
    client = logged_in(bob)

    async def scenario():
        async with connect(asgi_server, plan, client) as socket:
            await asyncio.wait_for(socket.recv(), timeout=10)
            # A real quiet minute: recv must time out with the socket still open, not end with it closed.
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(socket.recv(), timeout=IDLE_SECONDS)
            await in_thread(lambda: engine.plan_run(plan_id=plan.pk, actor=alice))
            return await asyncio.wait_for(socket.recv(), timeout=15)

    assert "Runtime approval needed" in run_async(scenario())


def test_a_reconnect_after_a_gap_shows_the_current_state(asgi_server, people):
    alice, bob = people
    plan = approved_plan(people, [step("s1", "noop"), step("g", "high_effect", {"label": "gap"})])
    client = logged_in(bob)

    async def scenario():
        async with connect(asgi_server, plan, client) as socket:
            before = await asyncio.wait_for(socket.recv(), timeout=10)
        # What happens while the page is offline reaches nobody...
        await in_thread(lambda: engine.plan_run(plan_id=plan.pk, actor=alice))
        async with connect(asgi_server, plan, client) as socket:
            return before, await asyncio.wait_for(socket.recv(), timeout=10)

    before, after = run_async(scenario())
    assert "Approved" in before and "Runtime approval needed" not in before
    # ...so the first message after reconnecting redraws everything that can have changed.
    assert 'id="plan-live" hx-swap-oob="true"' in after and "Running" in after
    assert 'id="plan-progress"' in after and 'id="step-live-s1"' in after
    assert "Runtime approval needed" in after and "Approve g" in after
    assert 'id="plan-graph"' in after and "status-waiting_approval" in after


def closed_on_next_event(asgi_server, plan, client, trigger, take_away) -> int:
    async def scenario():
        async with connect(asgi_server, plan, client) as socket:
            await asyncio.wait_for(socket.recv(), timeout=10)
            await in_thread(take_away)
            await in_thread(trigger)
            with pytest.raises(websockets.ConnectionClosed):
                await asyncio.wait_for(socket.recv(), timeout=15)
            return socket.close_code

    return run_async(scenario())


def test_logging_out_closes_the_socket_on_the_next_event(asgi_server, people):
    alice, bob = people
    plan = approved_plan(people, [step("g", "high_effect", {"label": "logout"})])
    client = logged_in(bob)
    code = closed_on_next_event(
        asgi_server, plan, client, trigger=lambda: engine.plan_run(plan_id=plan.pk, actor=alice), take_away=lambda: client.post("/logout/")
    )
    assert code == SESSION_GONE


def test_losing_the_role_closes_the_socket_on_the_next_event(asgi_server, people):
    alice, bob = people
    plan = approved_plan(people, [step("g", "high_effect", {"label": "demoted"})])
    code = closed_on_next_event(
        asgi_server,
        plan,
        logged_in(bob),
        trigger=lambda: engine.plan_run(plan_id=plan.pk, actor=alice),
        take_away=lambda: bob.groups.remove(Group.objects.get(name="approver")),
    )
    assert code == NOT_ALLOWED


def test_a_socket_without_a_session_is_refused(asgi_server, people):
    plan = approved_plan(people, [step("s1", "noop")])

    async def scenario():
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(socket_url(asgi_server, plan), origin=asgi_server, open_timeout=10):
                pass
        return refused.value.response.status_code

    assert run_async(scenario()) == 403


def badge_connect(asgi_server, client):
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    url = asgi_server.replace("http", "ws") + "/ws/badge/"
    return websockets.connect(url, origin=asgi_server, additional_headers={"Cookie": cookie}, open_timeout=10)


def test_the_nav_badge_counts_gates_for_approvers_and_refuses_everyone_else(asgi_server, people):
    alice, bob = people
    plan = approved_plan(people, [step("g", "high_effect", {"label": "badge"})])
    bob_client, alice_client = logged_in(bob), logged_in(alice)

    async def scenario():
        async with badge_connect(asgi_server, bob_client) as socket:
            before = await asyncio.wait_for(socket.recv(), timeout=10)
            await in_thread(lambda: engine.plan_run(plan_id=plan.pk, actor=alice))
            after = await asyncio.wait_for(socket.recv(), timeout=15)
        # An operator cannot decide gates, so the count is not theirs to watch.
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with badge_connect(asgi_server, alice_client):
                pass
        return before, after, refused.value.response.status_code

    before, after, refused = run_async(scenario())
    assert 'id="nav-gates-badge"' in before and " hidden" in before and ">0</span>" in before
    assert ">1</span>" in after and " hidden" not in after
    assert refused == 403
