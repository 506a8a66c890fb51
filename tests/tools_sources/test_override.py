"""An admin override of a tool's risk: it wins, it is audited, and it is shown as the reason."""

from approvals.models import AuditEvent
from tools.registry import registry


def test_an_admin_override_wins_and_is_shown_as_the_reason(desk, admin, client):
    client.force_login(admin)
    response = client.patch(
        "/api/tools/desk.close_ticket",
        {"risk": "medium", "idempotent": True, "reason": "closing is reversible here"},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["risk"], body["idempotent"], body["risk_reason"]) == ("medium", True, "admin override: closing is reversible here")
    assert registry.get("desk.close_ticket").risk == "medium"
    event = AuditEvent.objects.get(action="tool.overridden")
    assert event.actor_name == "root" and event.data["before"]["risk"] == "high" and event.data["reason"] == "closing is reversible here"


def test_an_override_needs_a_reason_and_an_admin(desk, admin, alice_client, client):
    assert (
        alice_client.patch("/api/tools/desk.close_ticket", {"risk": "low", "reason": "x"}, content_type="application/json").status_code
        == 403
    )
    client.force_login(admin)
    response = client.patch("/api/tools/desk.close_ticket", {"risk": "low", "reason": "  "}, content_type="application/json")
    assert response.status_code == 422 and "reason" in response.json()["detail"]
    assert registry.get("desk.close_ticket").risk == "high"
