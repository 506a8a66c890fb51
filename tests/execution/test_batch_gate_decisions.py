"""Several gates decided at once: each bound to its own hash, audited on its own; a stale one is refused
with its reason while the others go through."""

import pytest
from django.test import Client

from approvals.audit import verify
from approvals.models import ApiToken, AuditEvent
from core import jobs
from execution import engine
from planning.models import Step
from tests.conftest import make_user
from tests.fixtures.plans import approved_plan, step

S = Step.Status


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.setattr(jobs, "enqueue", lambda *args, **options: None)


@pytest.fixture
def people(db):
    return make_user("alice", "operator"), make_user("bob", "approver")


def waiting_gates(people, count):
    plan = approved_plan(people, [step(f"s{i}", "high_effect", {"label": f"pay {i}"}) for i in range(1, count + 1)])
    engine.plan_run(plan_id=plan.pk, actor=people[0])
    return plan, {s.key: s for s in Step.objects.filter(plan=plan)}


def test_a_batch_with_one_stale_gate_refuses_it_and_decides_the_others(people):
    plan, steps = waiting_gates(people, 3)
    body = [
        {"plan_id": plan.pk, "step_key": "s1", "gate_hash": steps["s1"].gate_hash, "approve": True, "comment": "ok"},
        {"plan_id": plan.pk, "step_key": "s2", "gate_hash": "a-hash-from-an-old-page", "approve": True, "comment": ""},
        {"plan_id": plan.pk, "step_key": "s3", "gate_hash": steps["s3"].gate_hash, "approve": False, "comment": "not this one"},
    ]
    token = ApiToken.issue(user=people[1])
    response = Client().post("/api/gates/decisions", body, content_type="application/json", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    outcomes = response.json()
    assert [o["ok"] for o in outcomes] == [True, False, True]
    assert outcomes[1]["status"] == 409 and "reload" in outcomes[1]["detail"]
    after = {s.key: s.status for s in Step.objects.filter(plan=plan)}
    assert after == {"s1": S.QUEUED, "s2": S.WAITING_APPROVAL, "s3": S.SKIPPED}
    decided = AuditEvent.objects.filter(action__in=["gate.approved", "gate.denied"], plan_id=plan.pk)
    assert sorted((e.step_key, e.action, e.data["gate_hash"]) for e in decided) == [
        ("s1", "gate.approved", steps["s1"].gate_hash),
        ("s3", "gate.denied", steps["s3"].gate_hash),
    ]
    assert verify()["ok"]


def test_the_inbox_form_decides_the_selected_gates(client, people):
    plan, steps = waiting_gates(people, 2)
    client.force_login(people[1])
    inbox = client.get("/").content.decode()
    assert f'value="{plan.pk}:s1:{steps["s1"].gate_hash}"' in inbox and "pay 1" in inbox
    response = client.post(
        "/gates/decisions/", {"gate": [f"{plan.pk}:s1:{steps['s1'].gate_hash}", f"{plan.pk}:s2:stale"], "approve": "yes"}
    )
    assert response.status_code == 302
    assert Step.objects.get(plan=plan, key="s1").status == S.QUEUED
    assert Step.objects.get(plan=plan, key="s2").status == S.WAITING_APPROVAL
    page = client.get("/").content.decode()
    assert "step s2: The arguments you saw are not the ones waiting" in page


def test_an_operator_cannot_decide_gates_in_a_batch(people):
    plan, steps = waiting_gates(people, 1)
    token = ApiToken.issue(user=people[0])
    body = [{"plan_id": plan.pk, "step_key": "s1", "gate_hash": steps["s1"].gate_hash, "approve": True}]
    outcome = (
        Client().post("/api/gates/decisions", body, content_type="application/json", headers={"Authorization": f"Bearer {token}"}).json()
    )
    assert outcome[0]["ok"] is False and outcome[0]["status"] == 403
