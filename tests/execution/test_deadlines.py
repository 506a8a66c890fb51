"""Deadlines: a decision nobody makes escalates once, then ends `expired` (never `denied`)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.audit import verify
from approvals.models import AuditEvent
from core import jobs
from execution import engine, metrics
from execution.reconcile import reconcile
from planning import services
from planning.models import Goal, Plan, Step
from planning.validation import validate_plan
from tests.conftest import make_user
from tests.fixtures.plans import approved_plan, step

S = Step.Status


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.setattr(jobs, "enqueue", lambda *args, **options: None)


@pytest.fixture
def people(db):
    return make_user("alice", "operator"), make_user("bob", "approver")


def waiting_gate(people):
    plan = approved_plan(people, [step("pay", "high_effect", {"label": "pay"}), step("look", "noop")])
    engine.plan_run(plan_id=plan.pk, actor=people[0])
    return plan


def test_a_gate_escalates_once_then_expires_as_expired_not_denied(people, settings):
    settings.COUNTERSIGN_GATE_DEADLINE_S, settings.COUNTERSIGN_GATE_EXPIRY_S = 60, 300
    plan = waiting_gate(people)
    later = timezone.now() + timedelta(seconds=61)
    assert reconcile(now=later)["escalated"] == 1
    assert reconcile(now=later + timedelta(seconds=5))["escalated"] == 0
    escalated = AuditEvent.objects.get(action="gate.escalated", step_key="pay")
    assert escalated.data["group"] == "admin" and "escalated to group admin" in escalated.data["reason"]

    assert reconcile(now=timezone.now() + timedelta(seconds=301))["expired"] == 1
    pay = Step.objects.get(plan=plan, key="pay")
    assert pay.status == S.SKIPPED and pay.note.startswith("Expired: no runtime approval within 5 min")
    expired = AuditEvent.objects.get(action="gate.expired", step_key="pay")
    assert expired.data["outcome"] == "expired" and expired.data["gate_hash"] == pay.gate_hash
    assert not AuditEvent.objects.filter(action="gate.denied").exists()
    assert metrics.summary().gates_expired == 1
    assert verify()["ok"]


def test_a_plan_nobody_approves_ends_expired_and_the_page_says_so(people, settings, client):
    settings.COUNTERSIGN_APPROVAL_EXPIRY_S = 3600
    plan = Plan.objects.create(goal=Goal.objects.create(text="Wait", requester=people[0]), status=Plan.Status.AWAITING_APPROVAL)
    services.write_revision(plan, validate_plan({"steps": [step("s1", "noop")]}), author=None, planner="human", reason="test")
    assert reconcile(now=timezone.now() + timedelta(minutes=59))["expired"] == 0
    assert reconcile(now=timezone.now() + timedelta(hours=1, seconds=1))["expired"] == 1
    plan.refresh_from_db()
    assert plan.status == Plan.Status.EXPIRED
    event = AuditEvent.objects.get(action="plan.expired", plan_id=plan.pk)
    assert event.data["reason"] == "Expired: no approval decision within 1 h."
    assert not AuditEvent.objects.filter(action="plan.rejected").exists()
    client.force_login(people[1])
    page = client.get(f"/plans/{plan.pk}/").content.decode()
    assert "Expired: no approval decision within 1 h." in page
    client.force_login(make_user("carol", "auditor"))
    assert "Expired" in client.get("/metrics/").content.decode()


def test_without_deadline_settings_nothing_escalates_or_expires(people):
    waiting_gate(people)
    counts = reconcile(now=timezone.now() + timedelta(days=30))
    assert counts["escalated"] == 0 and counts["expired"] == 0
