"""An API decision names the exact content it decides on: a plan's content_hash, a gate's gate_hash."""

import pytest
from django.test import Client

from approvals.models import ApiToken, Approval
from execution import engine
from planning.models import Plan, Step
from tests.fixtures.plans import approved_plan, step

JSON = {"content_type": "application/json"}


def auth(user):
    return {"Authorization": f"Bearer {ApiToken.issue(user=user)}"}


@pytest.fixture
def awaiting(alice, bob):
    plan = approved_plan((alice, bob), [step("s1", "noop")])
    Approval.objects.filter(plan=plan).delete()
    Plan.objects.filter(pk=plan.pk).update(status=Plan.Status.AWAITING_APPROVAL)
    return Plan.objects.get(pk=plan.pk)


@pytest.mark.parametrize("route,comment", [("approve", ""), ("reject", "no"), ("request-changes", "more")])
def test_a_plan_decision_without_content_hash_is_refused_with_422(bob, awaiting, route, comment):
    response = Client().post(
        f"/api/plans/{awaiting.pk}/{route}", {"revision": awaiting.revision, "comment": comment}, headers=auth(bob), **JSON
    )
    assert response.status_code == 422 and "content_hash" in str(response.json()["detail"])
    assert not Approval.objects.filter(plan=awaiting).exists()
    assert Plan.objects.get(pk=awaiting.pk).status == Plan.Status.AWAITING_APPROVAL


def test_a_plan_decision_with_the_hash_on_screen_is_recorded(bob, awaiting):
    body = {"revision": awaiting.revision, "content_hash": awaiting.content_hash}
    response = Client().post(f"/api/plans/{awaiting.pk}/approve", body, headers=auth(bob), **JSON)
    assert response.status_code == 200 and response.json()["status"] == "approved"


def test_a_gate_decision_without_gate_hash_is_refused_with_422(alice, bob):
    plan = approved_plan((alice, bob), [step("g", "high_effect", {"label": "pay"})])
    engine.plan_run(plan_id=plan.pk, actor=alice)
    response = Client().post(f"/api/plans/{plan.pk}/steps/g/decision", {"approve": True}, headers=auth(bob), **JSON)
    assert response.status_code == 422 and "gate_hash" in str(response.json()["detail"])
    assert Step.objects.get(plan=plan, key="g").status == Step.Status.WAITING_APPROVAL
    assert not Approval.objects.filter(plan=plan, kind=Approval.Kind.GATE).exists()
