"""Submitting a goal from the form and the API, the plan page while planning, and planning failures."""

import pytest
from django.urls import reverse

from approvals.models import AuditEvent
from planning import services
from planning.models import Goal, Plan


def test_the_inbox_shows_empty_states_and_the_goal_form_to_an_operator(alice_client):
    page = alice_client.get(reverse("inbox")).content.decode()
    assert "New goal" in page and 'name="text"' in page
    assert "Nothing here right now." in page


def test_the_inbox_hides_the_goal_form_from_an_approver(bob_client):
    page = bob_client.get(reverse("inbox")).content.decode()
    assert "New goal" not in page


def test_submitting_the_form_stores_the_goal_queues_planning_and_opens_the_plan(alice_client, alice, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        response = alice_client.post(reverse("goal_create"), {"text": "Return 2 Aviator sunglasses", "planner": "playbook"})
    plan = Plan.objects.get()
    assert response.status_code == 302 and response.url == reverse("plan_detail", args=[plan.pk])
    assert plan.status == Plan.Status.PLANNING and plan.goal.requester == alice and plan.requested_planner == "playbook"
    # Planning is queued once after the goal is committed; the other hook tells open inboxes.
    assert [c for c in callbacks if "flush" not in repr(c)] and len(callbacks) == 2, "planning is queued once, after the goal is committed"
    event = AuditEvent.objects.get(action="goal.submitted")
    assert event.actor == alice and event.plan_id == plan.pk and event.data["text"] == "Return 2 Aviator sunglasses"


def test_an_htmx_submission_redirects_the_client(alice_client):
    response = alice_client.post(reverse("goal_create"), {"text": "Return 2 Aviator sunglasses"}, headers={"HX-Request": "true"})
    assert response.status_code == 200 and response["HX-Redirect"].startswith("/plans/")


def test_an_empty_goal_is_refused_with_a_message_and_nothing_stored(alice_client):
    response = alice_client.post(reverse("goal_create"), {"text": "   "}, headers={"HX-Request": "true"})
    assert response.status_code == 422
    assert "This field is required" in response.content.decode() or "Describe the goal" in response.content.decode()
    assert not Goal.objects.exists()


def test_choosing_the_llm_when_none_is_configured_is_refused(alice_client, no_llm):
    response = alice_client.post(reverse("goal_create"), {"text": "Count tickets", "planner": "llm"})
    assert response.status_code == 422 and not Goal.objects.exists()


def test_an_auditor_cannot_submit_goals(client, carol):
    client.force_login(carol)
    client.post(reverse("goal_create"), {"text": "Buy everything"})
    assert not Goal.objects.exists()


def test_the_plan_page_says_planning_is_under_way_and_polls(alice_client, alice):
    plan = services.goal_submit(requester=alice, text="Return 2 Aviator sunglasses")
    page = alice_client.get(reverse("plan_detail", args=[plan.pk])).content.decode()
    assert "The planner is drafting this plan" in page and 'hx-trigger="every 1s"' in page
    poll = alice_client.get(reverse("plan_detail", args=[plan.pk]), headers={"HX-Request": "true", "HX-Target": "plan-status"})
    assert 'id="plan-status"' in poll.content.decode() and "<html" not in poll.content.decode()


def test_the_poll_reloads_the_page_once_the_plan_is_drafted(alice_client, alice, demo_data, no_llm):
    plan = services.goal_submit(requester=alice, text="Return 2 Aviator sunglasses")
    services.plan_generate(plan_id=plan.pk)
    poll = alice_client.get(reverse("plan_detail", args=[plan.pk]), headers={"HX-Request": "true", "HX-Target": "plan-status"})
    assert poll["HX-Refresh"] == "true"
    page = alice_client.get(reverse("plan_detail", args=[plan.pk])).content.decode()
    assert "Take back the pairs and refund" in page and "▲ HIGH" in page and "Playbook: Return sunglasses" in page
    assert "filled in from a stored playbook" in page


def test_a_planning_failure_shows_the_reason_and_plan_again_replans(
    alice_client, alice, demo_data, no_llm, django_capture_on_commit_callbacks
):
    plan = services.goal_submit(requester=alice, text="Compose a symphony")
    plan = services.plan_generate(plan_id=plan.pk)
    assert plan.status == Plan.Status.PLANNING_FAILED
    page = alice_client.get(reverse("plan_detail", args=[plan.pk])).content.decode()
    assert "Planning failed" in page and "No playbook resembles this goal" in page and "Plan again" in page
    with django_capture_on_commit_callbacks() as callbacks:
        alice_client.post(reverse("plan_retry", args=[plan.pk]), {"planner": "playbook"})
    plan.refresh_from_db()
    assert plan.status == Plan.Status.PLANNING and plan.failure_reason == "" and len(callbacks) == 1
    assert AuditEvent.objects.filter(action="plan.planning_requested", actor=alice).exists()


def test_plan_again_is_refused_for_a_plan_that_did_not_fail(alice_client, alice):
    plan = services.goal_submit(requester=alice, text="Return 2 Aviator sunglasses")
    response = alice_client.post(reverse("plan_retry", args=[plan.pk]), follow=True)
    assert "Only a plan whose planning failed" in response.content.decode()


def test_a_proposed_plan_is_audited_with_planner_model_tokens_and_hash(alice, fake_openai):
    import json

    fake_openai.reply(
        json.dumps({"steps": [{"key": "s1", "title": "Count", "tool": "count_open_tickets", "args": {}}]}),
        prompt_tokens=11,
        completion_tokens=7,
    )
    plan = services.plan_generate(plan_id=services.goal_submit(requester=alice, text="Count open tickets").pk)
    event = AuditEvent.objects.get(action="plan.proposed")
    assert event.plan_id == plan.pk and event.actor is None and event.actor_name == "system"
    assert event.data["planner"] == "llm" and event.data["tokens_in"] == 11 and event.data["tokens_out"] == 7
    assert event.data["content_hash"] == plan.content_hash and event.data["model"]
    assert (plan.tokens_in, plan.tokens_out, plan.revision) == (11, 7, 1)
    assert plan.revisions.get().content_hash == plan.content_hash


def test_planning_twice_does_not_duplicate_steps(alice, demo_data, no_llm):
    plan = services.goal_submit(requester=alice, text="Return 2 Aviator sunglasses")
    services.plan_generate(plan_id=plan.pk)
    services.plan_generate(plan_id=plan.pk)
    plan.refresh_from_db()
    assert plan.steps.count() == 2 and plan.revision == 1 and AuditEvent.objects.filter(action="plan.proposed").count() == 1


@pytest.mark.parametrize("text", ["<script>alert('x')</script>", '<img src=x onerror="alert(1)">'])
def test_planner_and_goal_text_render_inert(alice_client, alice, text):
    goal = Goal.objects.create(text=f"Goal {text}", requester=alice)
    plan = Plan.objects.create(goal=goal, status=Plan.Status.AWAITING_APPROVAL, revision=1, planner_source=text)
    plan.steps.create(key="s1", title=text, description=text, tool="count_open_tickets", args={"queue": text}, risk="low")
    page = alice_client.get(reverse("plan_detail", args=[plan.pk])).content.decode()
    assert text not in page
    assert "&lt;script&gt;" in page or "&lt;img" in page
    inbox = alice_client.get(reverse("inbox") + "?group=recent").content.decode()
    assert text not in inbox


def test_awaiting_my_approval_leaves_out_goals_i_requested_or_plans_i_edited(client, alice, bob, dave):
    from django.contrib.auth.models import Group

    bob.groups.add(Group.objects.get(name="operator"))
    theirs = Plan.objects.create(goal=Goal.objects.create(text="their goal", requester=alice), status=Plan.Status.AWAITING_APPROVAL)
    Plan.objects.create(goal=Goal.objects.create(text="bob's own goal", requester=bob), status=Plan.Status.AWAITING_APPROVAL)
    edited = Plan.objects.create(goal=Goal.objects.create(text="goal bob edited", requester=dave), status=Plan.Status.AWAITING_APPROVAL)
    edited.revisions.create(number=1, content=[], content_hash="x", author=bob, planner="human")
    client.force_login(bob)
    page = client.get(reverse("inbox")).content.decode()
    assert 'Awaiting my approval <span class="count">1</span>' in page
    assert "their goal" in page and "bob&#x27;s own goal" not in page and "goal bob edited" not in page
    assert theirs.pk


def test_inbox_query_count_does_not_grow_with_plans(alice_client, alice, django_assert_max_num_queries):
    for index in range(30):
        goal = Goal.objects.create(text=f"Goal {index}", requester=alice)
        Plan.objects.create(goal=goal, status=Plan.Status.AWAITING_APPROVAL)
    with django_assert_max_num_queries(12):
        page = alice_client.get(reverse("inbox") + "?group=recent")
    assert "Page 1 of 2" in page.content.decode()


def test_inbox_filters_by_status_with_counts(alice_client, alice):
    for status in [Plan.Status.AWAITING_APPROVAL, Plan.Status.AWAITING_APPROVAL, Plan.Status.PLANNING_FAILED]:
        Plan.objects.create(goal=Goal.objects.create(text=f"goal {status}", requester=alice), status=status)
    page = alice_client.get(reverse("inbox") + "?group=attention").content.decode()
    assert "goal planning_failed" in page and "goal awaiting_approval" not in page
    assert 'Awaiting approval <span class="count">2</span>' in page
