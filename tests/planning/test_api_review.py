"""The review operations through the API: same services, same rules, JSON errors."""

import pytest

from approvals.models import ApiToken, AuditEvent
from planning import services
from planning.models import Plan


@pytest.fixture
def plan(alice, demo_data, no_llm):
    return services.plan_generate(plan_id=services.goal_submit(requester=alice, text="Return 2 Aviator sunglasses").pk)


def auth(user):
    return {"Authorization": f"Bearer {ApiToken.issue(user=user)}"}


def test_patch_a_step_then_approve_through_the_api(client, alice, bob, plan):
    response = client.patch(
        f"/api/plans/{plan.pk}/steps/s2",
        {"revision": 1, "args": {"item": "{{ steps.s1.output.item_id }}", "quantity": 1}},
        content_type="application/json",
        headers=auth(alice),
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["revision"] == 2 and body["steps"][1]["args"]["quantity"] == 1
    approved = client.post(
        f"/api/plans/{plan.pk}/approve",
        {"revision": 2, "content_hash": body["content_hash"]},
        content_type="application/json",
        headers=auth(bob),
    )
    assert approved.status_code == 200 and approved.json()["status"] == "approved"
    assert approved.json()["approvals"][0]["content_hash"] == body["content_hash"]


def test_api_edit_errors_are_409_for_stale_and_422_with_issues_for_invalid(client, alice, plan):
    stale = client.patch(
        f"/api/plans/{plan.pk}/steps/s1", {"revision": 7, "title": "x"}, content_type="application/json", headers=auth(alice)
    )
    assert stale.status_code == 409 and stale.json()["current_revision"] == 1
    invalid = client.patch(
        f"/api/plans/{plan.pk}/steps/s1", {"revision": 1, "tool": "no_such_tool"}, content_type="application/json", headers=auth(alice)
    )
    assert invalid.status_code == 422 and invalid.json()["issues"][0] == {
        "step": "s1",
        "field": "tool",
        "message": "unknown tool 'no_such_tool'",
    }
    missing = client.patch(
        f"/api/plans/{plan.pk}/steps/s9", {"revision": 1, "title": "x"}, content_type="application/json", headers=auth(alice)
    )
    assert missing.status_code == 404
    assert Plan.objects.get(pk=plan.pk).revision == 1


def test_add_and_delete_steps_through_the_api(client, alice, plan):
    added = client.post(
        f"/api/plans/{plan.pk}/steps",
        {"revision": 1, "title": "Check stock", "tool": "search_inventory", "args": {"keywords": ["aviator"]}},
        content_type="application/json",
        headers=auth(alice),
    )
    assert added.status_code == 201 and added.json()["steps"][-1]["key"] == "s3"
    deleted = client.delete(f"/api/plans/{plan.pk}/steps/s3?revision=2", headers=auth(alice))
    assert deleted.status_code == 200 and [s["key"] for s in deleted.json()["steps"]] == ["s1", "s2"]
    assert AuditEvent.objects.filter(action="plan.edited").count() == 2


def test_api_refuses_approver_edits_outside_review_and_approvals_from_the_requester(client, alice, bob, plan):
    from django.contrib.auth.models import Group

    alice.groups.add(Group.objects.get(name="approver"))
    own = client.post(
        f"/api/plans/{plan.pk}/approve",
        {"revision": 1, "content_hash": plan.content_hash},
        content_type="application/json",
        headers=auth(alice),
    )
    assert own.status_code == 403 and "Four-eyes" in own.json()["detail"]
    approved = client.post(
        f"/api/plans/{plan.pk}/approve",
        {"revision": 1, "content_hash": plan.content_hash},
        content_type="application/json",
        headers=auth(bob),
    )
    assert approved.status_code == 200
    # Once approved, an approver (who is no operator) may no longer edit it.
    late = client.patch(f"/api/plans/{plan.pk}/steps/s1", {"revision": 1, "title": "x"}, content_type="application/json", headers=auth(bob))
    assert late.status_code == 403 and "only while it awaits approval" in late.json()["detail"]


def test_reject_through_the_api_needs_a_comment(client, bob, plan):
    uncommented = client.post(
        f"/api/plans/{plan.pk}/reject",
        {"revision": 1, "content_hash": plan.content_hash},
        content_type="application/json",
        headers=auth(bob),
    )
    assert uncommented.status_code == 422 and "comment" in uncommented.json()["detail"]
    rejected = client.post(
        f"/api/plans/{plan.pk}/reject",
        {"revision": 1, "content_hash": plan.content_hash, "comment": "Wrong customer"},
        content_type="application/json",
        headers=auth(bob),
    )
    assert rejected.status_code == 200 and rejected.json()["status"] == "rejected"
