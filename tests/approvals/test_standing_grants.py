"""Standing grants: a live grant decides the gates it covers, counted down, then stops matching."""

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals import grants
from approvals.audit import verify
from approvals.models import AuditEvent, StandingGrant
from core import jobs
from core.errors import ServiceError
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


def refunds(people, count, label="refund"):
    plan = approved_plan(people, [step(f"s{i}", "high_effect", {"label": label}) for i in range(1, count + 1)])
    engine.plan_run(plan_id=plan.pk, actor=people[0])
    return {s.key: s for s in Step.objects.filter(plan=plan)}


def test_a_grant_for_two_uses_decides_exactly_two_gates_then_stops(people):
    grant = grants.grant_create(actor=people[1], tool="high_effect", predicate={"label": {"equals": "refund"}}, max_uses=2)
    steps = refunds(people, 3)
    statuses = sorted(s.status for s in steps.values())
    assert statuses == sorted([S.QUEUED, S.QUEUED, S.WAITING_APPROVAL])
    grant.refresh_from_db()
    assert grant.uses == 2 and grant.state() == "used up"
    decided = AuditEvent.objects.filter(action="gate.approved_by_grant")
    assert decided.count() == 2 and {e.data["grant_id"] for e in decided} == {grant.pk}
    assert [e.data["uses_left"] for e in decided.order_by("seq")] == [1, 0]
    assert next(s for s in steps.values() if s.status == S.QUEUED).note.startswith(f"Approved by standing grant #{grant.pk}")
    assert verify()["ok"]


def test_a_grant_does_not_cover_arguments_outside_its_predicate(people):
    grants.grant_create(actor=people[1], tool="high_effect", predicate={"label": {"equals": "refund"}}, max_uses=5)
    steps = refunds(people, 1, label="wire transfer")
    assert steps["s1"].status == S.WAITING_APPROVAL


def test_numeric_bounds_match_within_and_not_outside():
    predicate = {"quantity": {"min": 1, "max": 2}, "item": {"equals": "Aviator"}}
    assert grants.predicate_matches(predicate, {"quantity": 2, "item": "Aviator"})
    assert not grants.predicate_matches(predicate, {"quantity": 3, "item": "Aviator"})
    assert not grants.predicate_matches(predicate, {"quantity": "2", "item": "Aviator"})


def test_revoked_and_expired_grants_stop_matching(people):
    revoked = grants.grant_create(actor=people[1], tool="high_effect", predicate={}, max_uses=5)
    grants.grant_revoke(grant_id=revoked.pk, actor=people[1])
    expired = grants.grant_create(actor=people[1], tool="high_effect", predicate={}, expires_at=timezone.now() + timedelta(hours=1))
    StandingGrant.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    steps = refunds(people, 1)
    assert steps["s1"].status == S.WAITING_APPROVAL
    assert AuditEvent.objects.filter(action="grant.revoked", data__grant_id=revoked.pk).exists()


def test_a_grant_by_the_goals_requester_does_not_decide_their_own_gates(people):
    alice = people[0]
    alice.groups.add(people[1].groups.get(name="approver"))
    grants.grant_create(actor=alice, tool="high_effect", predicate={}, max_uses=5)
    assert refunds(people, 1)["s1"].status == S.WAITING_APPROVAL


def test_a_grant_needs_a_limit_and_an_approver(people):
    with pytest.raises(ServiceError, match="needs a limit"):
        grants.grant_create(actor=people[1], tool="high_effect", predicate={})
    with pytest.raises(ServiceError, match="Only approvers"):
        grants.grant_create(actor=people[0], tool="high_effect", predicate={}, max_uses=1)
    with pytest.raises(ServiceError, match="bounds"):
        grants.grant_create(actor=people[1], tool="high_effect", predicate={"n": {"min": "x"}}, max_uses=1)
