"""Estimates on the approval card and in the API: duration from each tool's history along the critical
path, LLM cost so far, and the blast radius (steps that change something, recipients, the largest amount)."""

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from planning import services
from planning.estimates import plan_estimates
from planning.models import Goal, Plan, Step
from planning.validation import validate_plan
from tests.conftest import make_user
from tests.fixtures.plans import step


@pytest.fixture
def people(demo_data):
    return make_user("alice", "operator"), make_user("bob", "approver")


def plan_with(people, steps) -> Plan:
    plan = Plan.objects.create(goal=Goal.objects.create(text="Estimate", requester=people[0]), status=Plan.Status.AWAITING_APPROVAL)
    services.write_revision(plan, validate_plan({"steps": steps}), author=None, planner="human", reason="test")
    return Plan.objects.get(pk=plan.pk)


def history(people, tool, durations):
    plan = plan_with(people, [step("x", "noop")])
    now = timezone.now()
    for n, seconds in enumerate(durations):
        Step.objects.create(
            plan=plan, key=f"h{n}", position=n + 1, title="h", tool=tool, status="succeeded",
            started_at=now - timedelta(seconds=seconds), finished_at=now,
        )  # fmt: skip


def test_duration_follows_the_critical_path_of_each_tools_history(people):
    history(people, "noop", [1, 1, 1, 1, 1, 1, 1, 1, 1, 10])
    history(people, "record_effect", [4, 4, 4])
    # a ─┬─ b (record_effect) ─┬─ d   p50: a→b→d = 1 + 4 + 1 = 6 (c is shorter); p90: a→c→d = 10 + 10 + 10 = 30.
    #    └─ c ────────────────┘
    plan = plan_with(
        people,
        [
            step("a", "noop"),
            step("b", "record_effect", {"label": "x"}, depends_on=["a"]),
            step("c", "noop", depends_on=["a"]),
            step("d", "noop", depends_on=["b", "c"]),
        ],
    )
    found = plan_estimates(plan, plan.steps.all())
    assert found.p50_s == pytest.approx(6, abs=0.1) and found.p90_s == pytest.approx(30, abs=0.1)
    assert found.changing_steps == 1 and found.unknown_tools == ()


def test_a_tool_that_never_ran_makes_the_duration_unknown_and_the_blast_radius_is_counted(people, settings):
    settings.COUNTERSIGN_ORG_DOMAINS = ["example.com"]
    plan = plan_with(
        people,
        [
            step("buy", "purchase_item", {"item": "Aviator", "quantity": 3, "customer_name": "Ann"}),
            step("tell", "send_email", {"to": "ann@elsewhere.net", "subject": "Order", "body": "Done"}),
            step("cc", "send_email", {"to": "ops@example.com", "subject": "Order", "body": "Done"}),
        ],
    )
    found = plan_estimates(plan, plan.steps.all())
    assert found.p50_s is None and set(found.unknown_tools) == {"purchase_item", "send_email"}
    assert found.recipients == ("ann@elsewhere.net", "ops@example.com") and found.external_recipients == ("ann@elsewhere.net",)
    assert found.largest_amount == 240 and found.changing_steps == 3

    client = Client()
    client.force_login(people[1])
    page = client.get(reverse("plan_detail", args=[plan.pk])).content.decode()
    assert 'id="estimates"' in page and "duration unknown" in page and "recipients: 2 (1 outside the organisation)" in page
    assert "largest amount 240.00" in page
    api = client.get(f"/api/plans/{plan.pk}").json()["estimates"]
    assert api["largest_amount"] == 240 and api["external_recipients"] == ["ann@elsewhere.net"] and api["duration_p50_s"] is None
