import io

from django.core.management import call_command
from django.test import Client

from planning import services
from planning.models import Plan


def issue(username: str) -> str:
    out = io.StringIO()
    call_command("issue_token", username, stdout=out)
    return out.getvalue().strip()


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def test_issue_token_prints_a_token_that_authenticates_the_api(client, alice):
    token = issue("alice")
    response = client.post("/api/goals", {"text": "Return 2 Aviator sunglasses"}, content_type="application/json", headers=bearer(token))
    assert response.status_code == 201
    body = response.json()
    plan = Plan.objects.get(pk=body["plan_id"])
    assert body == {"goal_id": plan.goal_id, "plan_id": plan.pk, "status": "planning"} and plan.goal.requester == alice


def test_a_wrong_token_is_401(client, alice):
    response = client.get("/api/tools", headers=bearer("cs_not-a-token"))
    assert response.status_code == 401 and "detail" in response.json()


def test_issue_token_for_an_unknown_user_fails(db):
    import pytest
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="No user named"):
        call_command("issue_token", "ghost")


def test_session_auth_on_the_api_requires_the_csrf_token(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post("/api/goals", {"text": "Return 2 Aviator sunglasses"}, content_type="application/json")
    assert response.status_code in {401, 403}
    assert not Plan.objects.exists()


def test_only_operators_submit_goals_through_the_api(client, carol):
    response = client.post("/api/goals", {"text": "x"}, content_type="application/json", headers=bearer(issue("carol")))
    assert response.status_code == 403 and response.json()["detail"] == "Only operators can submit goals."


def test_bad_goal_payloads_are_422_with_detail(client, alice):
    headers = bearer(issue("alice"))
    for payload in [{}, {"text": ""}, {"text": "x", "mode": "poetry"}, {"text": "x" * 5000}]:
        response = client.post("/api/goals", payload, content_type="application/json", headers=headers)
        assert response.status_code == 422, payload
        assert "detail" in response.json()
    response = client.post("/api/goals", "not json", content_type="application/json", headers=headers)
    assert response.status_code in {400, 422}
    assert not Plan.objects.exists()


def test_code_mode_is_refused_when_no_llm_is_configured(client, alice, no_llm):
    response = client.post("/api/goals", {"text": "x", "mode": "code"}, content_type="application/json", headers=bearer(issue("alice")))
    assert response.status_code == 422 and "Code plans are written by an LLM" in response.json()["detail"]


def test_get_plan_returns_steps_revision_hash_and_approvals(client, alice, carol, demo_data, no_llm):
    plan = services.plan_generate(plan_id=services.goal_submit(requester=alice, text="Return 2 Aviator sunglasses").pk)
    body = client.get(f"/api/plans/{plan.pk}", headers=bearer(issue("carol"))).json()
    assert body["status"] == "awaiting_approval" and body["revision"] == 1 and body["content_hash"] == plan.content_hash
    assert [s["key"] for s in body["steps"]] == ["s1", "s2"] and body["steps"][1]["risk"] == "high"
    assert body["approvals"] == [] and body["planner"] == "playbook" and body["requester"] == "alice"


def test_get_plan_is_404_for_a_missing_plan_and_403_without_a_role(client, alice, nobody):
    assert client.get("/api/plans/999999", headers=bearer(issue("alice"))).status_code == 404
    assert client.get("/api/plans/1", headers=bearer(issue("nobody"))).status_code == 403


def test_openapi_schema_lists_the_routes(client, alice):
    schema = client.get("/api/openapi.json", headers=bearer(issue("alice"))).json()
    assert {"/api/tools", "/api/goals", "/api/plans/{plan_id}"} <= set(schema["paths"])
