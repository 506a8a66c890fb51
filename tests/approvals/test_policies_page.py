"""The Policies page lists the policy files and grants; an approver grants and revokes there."""

import pytest

from approvals.models import AuditEvent, StandingGrant
from tests.conftest import make_user


@pytest.fixture
def bob(db):
    return make_user("bob", "approver")


def test_an_approver_grants_and_revokes_from_the_policies_page(client, bob):
    client.force_login(bob)
    page = client.get("/policies/?tool=high_effect").content.decode()
    assert "one-approver" in page and "high-risk-gate" in page and 'value="high_effect"' in page
    body = {"tool": "high_effect", "predicate": '{"label": {"equals": "refund"}}', "max_uses": "3", "reason": "refunds this week"}
    client.post("/policies/grants/", body)
    grant = StandingGrant.objects.get()
    assert grant.max_uses == 3 and grant.predicate == {"label": {"equals": "refund"}}
    client.post(f"/policies/grants/{grant.pk}/revoke")
    grant.refresh_from_db()
    assert grant.state() == "revoked"
    assert list(AuditEvent.objects.values_list("action", flat=True)) == ["grant.created", "grant.revoked"]


def test_an_operator_cannot_see_the_policies_page(client, db):
    client.force_login(make_user("alice", "operator"))
    assert client.get("/policies/").status_code == 403


def test_the_api_lists_policies_and_manages_grants(client, bob):
    client.force_login(bob)
    assert {p["id"] for p in client.get("/api/policies").json()} == {"one-approver", "high-risk-gate", "untrusted-into-risky-gate"}
    created = client.post("/api/grants", {"tool": "noop", "predicate": {}, "max_uses": 1}, content_type="application/json")
    assert created.status_code == 201 and created.json()["state"] == "live"
    grant_id = created.json()["grant_id"]
    assert client.get(f"/api/grants/{grant_id}").json()["uses_left"] == 1
    assert client.delete(f"/api/grants/{grant_id}").json()["state"] == "revoked"
    assert client.delete(f"/api/grants/{grant_id}").status_code == 409
    assert client.post("/api/grants", {"tool": "noop", "predicate": {}}, content_type="application/json").status_code == 422
