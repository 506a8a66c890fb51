"""Changes requested is a state of its own: the operator sees the approver's comment and resubmits."""

import pytest
from django.urls import reverse

from approvals.models import AuditEvent
from planning.models import Plan
from planning.review import plan_decision_record
from tests.fixtures.plans import approved_plan, step
from tests.planning.test_changes_since_proposal import proposed_plan

pytestmark = pytest.mark.django_db


def test_the_operator_sees_the_requested_changes_and_resubmits(alice, bob, alice_client):
    plan = proposed_plan(alice)
    plan_decision_record(
        plan_id=plan.pk, actor=bob, revision=1, content_hash=plan.content_hash, decision="changes_requested", comment="Refund 1 pair, not 2"
    )
    assert Plan.objects.get(pk=plan.pk).status == Plan.Status.CHANGES_REQUESTED

    page = alice_client.get(f"/plans/{plan.pk}/").content.decode()
    assert "Changes requested" in page and "bob requested changes</strong> to revision 1: “Refund 1 pair, not 2”" in page
    assert "Resubmit for approval" in page
    inbox = alice_client.get("/?group=changes").content.decode()
    assert 'Changes requested <span class="count">1</span>' in inbox and "Return sunglasses" in inbox

    alice_client.post(reverse("plan_resubmit", args=[plan.pk]))

    assert Plan.objects.get(pk=plan.pk).status == Plan.Status.AWAITING_APPROVAL
    assert AuditEvent.objects.get(action="plan.resubmitted").actor_id == alice.pk
    assert "Resubmit for approval" not in alice_client.get(f"/plans/{plan.pk}/").content.decode()


def test_the_running_tab_does_not_count_an_approved_plan_that_has_not_started(alice, bob, alice_client):
    approved_plan((alice, bob), [step("s1", "noop")])
    inbox = alice_client.get("/").content.decode()
    assert 'Running <span class="count">0</span>' in inbox
    assert 'Approved, not started <span class="count">1</span>' in inbox
