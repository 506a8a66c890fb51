"""Only options that can work are offered, with a reason an operator understands; a failed plan offers
"edit goal and plan again" and "start from an empty plan"."""

import pytest

from approvals.models import AuditEvent
from planning.models import Goal, Plan

pytestmark = pytest.mark.django_db


def failed_plan(alice) -> Plan:
    goal = Goal.objects.create(text="Do the impossible", requester=alice)
    return Plan.objects.create(goal=goal, status=Plan.Status.PLANNING_FAILED, failure_reason="No playbook matches this goal.")


def test_without_an_llm_code_mode_and_the_llm_planner_are_not_offered_and_the_form_says_why(no_llm, alice_client):
    page = alice_client.get("/").content.decode()
    assert 'value="code"' not in page and 'value="llm"' not in page
    assert "No LLM is configured on this server, so plans come from stored playbooks" in page


def test_with_an_llm_both_are_offered(fake_openai, alice_client):
    page = alice_client.get("/").content.decode()
    assert 'value="code"' in page and 'value="llm"' in page and "No LLM is configured" not in page


def test_a_failed_plan_offers_plan_again_without_the_llm_when_none_is_configured(no_llm, alice, alice_client):
    page = alice_client.get(f"/plans/{failed_plan(alice).pk}/").content.decode()
    assert "Edit goal and plan again" in page and "Start from an empty plan" in page
    assert '<option value="llm">' not in page and "No LLM is configured" in page


def test_editing_the_goal_plans_it_again(no_llm, alice, alice_client, django_capture_on_commit_callbacks):
    plan = failed_plan(alice)
    with django_capture_on_commit_callbacks():
        alice_client.post(f"/plans/{plan.pk}/retry-goal/", {"text": "Return 2 Aviator sunglasses"})
    plan.refresh_from_db()
    assert plan.goal.text == "Return 2 Aviator sunglasses" and plan.status == Plan.Status.PLANNING
    assert AuditEvent.objects.get(action="goal.edited").data["before"] == "Do the impossible"


def test_starting_from_an_empty_plan_lets_the_operator_add_steps(alice, alice_client):
    plan = failed_plan(alice)
    alice_client.post(f"/plans/{plan.pk}/start-empty/")
    plan.refresh_from_db()
    assert plan.status == Plan.Status.AWAITING_APPROVAL and plan.revision == 1 and plan.planner == "human"
    page = alice_client.get(f"/plans/{plan.pk}/").content.decode()
    assert "Add a step" in page and "Started from an empty plan" in page
