"""Issue 17's smaller items: the audit Action filter lists each action once; the playbook banner leaves
once the plan is approved."""

import pytest

from approvals import audit
from planning.models import Plan
from planning.review import plan_decision_record
from tests.planning.test_changes_since_proposal import proposed_plan

pytestmark = pytest.mark.django_db


def test_the_audit_action_filter_lists_each_action_once(alice, carol, client):
    plan = proposed_plan(alice)
    for _ in range(3):
        audit.record(action="plan.proposed", plan_id=plan.pk, data={})
    client.force_login(carol)
    page = client.get("/audit/").content.decode()
    assert page.count(">plan.proposed</option>") == 1


def test_the_playbook_banner_leaves_once_the_plan_is_approved(alice, bob, alice_client):
    plan = proposed_plan(alice)
    Plan.objects.filter(pk=plan.pk).update(planner="playbook")
    assert "filled in from a stored playbook" in alice_client.get(f"/plans/{plan.pk}/").content.decode()
    plan_decision_record(plan_id=plan.pk, actor=bob, revision=1, content_hash=plan.content_hash, decision="approved")
    assert "filled in from a stored playbook" not in alice_client.get(f"/plans/{plan.pk}/").content.decode()
