"""An approver fixes a small thing during review instead of a request-changes round trip: the edit makes
them an author of the revision, so another approver countersigns it; outside review they cannot edit."""

import json

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import AuditEvent
from core.errors import ServiceError
from planning import services
from planning.models import Plan, PlanRevision
from planning.review import plan_decision_record
from tests.conftest import make_user
from tests.planning.test_plan_review import HTMX, edit_data


@pytest.fixture
def plan(alice, demo_data, no_llm):
    return services.plan_generate(
        plan_id=services.goal_submit(
            requester=alice, text="Check open ticket count against the SLA and notify the on-call engineer if breached"
        ).pk
    )


def test_an_approver_edits_a_step_during_review_and_another_approver_must_countersign(bob_client, bob, plan):
    data = edit_data(plan, "s1", args=json.dumps({"queue": "billing"}))
    response = bob_client.post(reverse("step_edit", args=[plan.pk, "s1"]), data, headers=HTMX)
    body = response.content.decode()
    assert response.status_code == 200 and "Saved as revision 2" in body
    assert "another approver must countersign" in body
    plan.refresh_from_db()
    assert plan.status == Plan.Status.AWAITING_APPROVAL and plan.steps.get(key="s1").args == {"queue": "billing"}
    assert PlanRevision.objects.get(plan=plan, number=2).author == bob
    assert AuditEvent.objects.filter(action="plan.edited", actor=bob).count() == 1

    page = bob_client.get(reverse("plan_detail", args=[plan.pk])).content.decode()
    assert "you edited this plan, so someone else must approve it" in page
    with pytest.raises(ServiceError, match="you edited this plan"):
        plan_decision_record(plan_id=plan.pk, actor=bob, revision=2, content_hash=plan.content_hash, decision="approved")
    erin = make_user("erin", "approver")
    plan_decision_record(plan_id=plan.pk, actor=erin, revision=2, content_hash=plan.content_hash, decision="approved")
    assert Plan.objects.get(pk=plan.pk).status == Plan.Status.APPROVED


def test_the_review_page_offers_an_approver_the_edit_controls(bob_client, plan):
    page = bob_client.get(reverse("plan_detail", args=[plan.pk])).content.decode()
    assert reverse("step_edit", args=[plan.pk, "s1"]) in page


def test_an_approver_cannot_edit_a_plan_that_has_left_review(bob_client, bob, plan):
    erin = make_user("erin", "approver")
    plan_decision_record(plan_id=plan.pk, actor=erin, revision=1, content_hash=plan.content_hash, decision="approved")
    data = edit_data(Plan.objects.get(pk=plan.pk), "s1", args=json.dumps({"queue": "billing"}))
    response = bob_client.post(reverse("step_edit", args=[plan.pk, "s1"]), data, headers=HTMX)
    assert response.status_code == 403
    api = Client()
    api.force_login(bob)
    patched = api.patch(f"/api/plans/{plan.pk}/steps/s1", {"revision": 1, "args": {"queue": "billing"}}, content_type="application/json")
    assert patched.status_code == 403 and "only while it awaits approval" in patched.json()["detail"]
    page = bob_client.get(reverse("plan_detail", args=[plan.pk])).content.decode()
    assert reverse("step_edit", args=[plan.pk, "s1"]) not in page
    # The service checks again under the plan's lock, whatever the view saw.
    with pytest.raises(ServiceError, match="only while it awaits approval"):
        services.step_update(plan_id=plan.pk, actor=bob, revision=1, key="s1", changes={"args": {"queue": "billing"}})
    assert Plan.objects.get(pk=plan.pk).revision == 1


def test_an_auditor_still_cannot_edit(carol, plan):
    client = Client()
    client.force_login(carol)
    data = edit_data(plan, "s1", args=json.dumps({"queue": "billing"}))
    assert client.post(reverse("step_edit", args=[plan.pk, "s1"]), data, headers=HTMX).status_code == 403
    with pytest.raises(ServiceError, match="Only operators, and approvers during review"):
        services.step_update(plan_id=plan.pk, actor=carol, revision=1, key="s1", changes={"args": {"queue": "billing"}})
