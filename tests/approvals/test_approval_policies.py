"""Approval policies as Cedar files: deny, M-of-N, runtime gates required by policy, shadow mode, and the
start-up check that names the bad file and line."""

from pathlib import Path

import pytest
from django.contrib.auth.models import Group

from approvals import policies
from approvals.audit import verify
from approvals.models import AuditEvent
from core import jobs
from core.errors import ServiceError
from execution import engine, gates
from planning import services
from planning.models import Goal, Plan, Step
from planning.review import plan_decision_record, valid_plan_approval
from planning.validation import validate_plan
from tests.conftest import make_user
from tests.fixtures.plans import step

SHIPPED = Path(policies.__file__).parent / "policies" / "defaults.cedar"

FINANCE_POLICY = """
@id("finance-purchases")
@reason("Purchases over 100 need two approvers from finance.")
@approvals("2")
@groups("finance")
permit (principal, action == Action::"approve_plan", resource)
when { resource.tool == "purchase_item" && resource has amount && resource.amount > 100 };
"""

NO_RETURNS_OF_AVIATORS = """
@id("no-aviator-returns")
@reason("Aviators are final sale.")
forbid (principal, action == Action::"approve_plan", resource)
when { resource.tool == "return_item" && resource.hasTag("item") && resource.getTag("item") == "Aviator" };
"""

GATE_MEDIUM_EFFECTS = """
@id("gate-recorded-effects")
@reason("Recorded effects are checked by a person first.")
@gate("required")
permit (principal, action == Action::"run_step", resource)
when { resource.tool == "record_effect" };
"""


@pytest.fixture
def policy_dir(tmp_path, settings):
    """A policy directory holding the shipped defaults; tests add their own files."""
    (tmp_path / "defaults.cedar").write_text(SHIPPED.read_text())
    settings.COUNTERSIGN_POLICY_DIR = str(tmp_path)
    policies.reload()
    yield tmp_path
    policies.reload()


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.setattr(jobs, "enqueue", lambda *args, **options: None)


@pytest.fixture
def people(demo_data):
    alice, bob = make_user("alice", "operator"), make_user("bob", "approver")
    finance = Group.objects.get_or_create(name="finance")[0]
    erin, frank = make_user("erin", "approver"), make_user("frank", "approver")
    erin.groups.add(finance)
    frank.groups.add(finance)
    return {"alice": alice, "bob": bob, "erin": erin, "frank": frank}


def plan_of(people, steps) -> Plan:
    plan = Plan.objects.create(
        goal=Goal.objects.create(text="Buy sunglasses", requester=people["alice"]), status=Plan.Status.AWAITING_APPROVAL, planner="human"
    )
    services.write_revision(plan, validate_plan({"steps": steps}), author=None, planner="human", reason="test plan")
    return Plan.objects.get(pk=plan.pk)


def approve(plan, user):
    plan.refresh_from_db()
    plan_decision_record(plan_id=plan.pk, actor=user, revision=plan.revision, content_hash=plan.content_hash, decision="approved")
    plan.refresh_from_db()
    return plan


def purchase(quantity):
    return step("s1", "purchase_item", {"item": "Aviator", "quantity": quantity, "customer_name": "Alice"})


def test_with_the_shipped_policies_one_approver_approves_a_purchase(policy_dir, people):
    plan = approve(plan_of(people, [purchase(3)]), people["bob"])
    assert plan.status == Plan.Status.APPROVED and valid_plan_approval(plan) is not None


def test_a_purchase_of_three_at_80_needs_two_approvers_from_finance(policy_dir, people):
    (policy_dir / "finance.cedar").write_text(FINANCE_POLICY)
    policies.reload()
    plan = approve(plan_of(people, [purchase(3)]), people["erin"])
    assert plan.status == Plan.Status.AWAITING_APPROVAL and valid_plan_approval(plan) is None
    event = AuditEvent.objects.filter(action="plan.approved", plan_id=plan.pk).last()
    assert event.data["approvals"] == "1 of 2 approvals (needs one more from group finance)"
    assert not event.data["complete"]
    with pytest.raises(ServiceError, match="already approved"):
        approve(plan, people["erin"])
    with pytest.raises(ServiceError, match="does not count"):
        approve(plan, people["bob"])
    plan = approve(plan, people["frank"])
    assert plan.status == Plan.Status.APPROVED and valid_plan_approval(plan) is not None
    assert AuditEvent.objects.filter(action="plan.approved", plan_id=plan.pk).last().data["complete"]
    assert verify()["ok"]


def test_a_purchase_of_one_at_80_needs_one_approver(policy_dir, people):
    (policy_dir / "finance.cedar").write_text(FINANCE_POLICY)
    policies.reload()
    plan = approve(plan_of(people, [purchase(1)]), people["bob"])
    assert plan.status == Plan.Status.APPROVED


def test_an_edit_voids_every_approval_towards_the_two(policy_dir, people):
    (policy_dir / "finance.cedar").write_text(FINANCE_POLICY)
    policies.reload()
    plan = approve(plan_of(people, [purchase(3)]), people["erin"])
    services.step_update(plan_id=plan.pk, actor=people["alice"], revision=plan.revision, key="s1", changes={"title": "Buy three"})
    plan = approve(plan, people["frank"])
    assert plan.status == Plan.Status.AWAITING_APPROVAL
    plan = approve(plan, people["erin"])
    assert plan.status == Plan.Status.APPROVED


def test_four_eyes_holds_for_each_of_the_approvers(policy_dir, people):
    (policy_dir / "finance.cedar").write_text(FINANCE_POLICY)
    policies.reload()
    people["alice"].groups.add(Group.objects.get(name="approver"), Group.objects.get(name="finance"))
    plan = approve(plan_of(people, [purchase(3)]), people["erin"])
    with pytest.raises(ServiceError, match="Four-eyes"):
        approve(plan, people["alice"])


def test_a_denied_step_stops_the_plan_from_being_approved_with_the_policy_reason(policy_dir, people):
    (policy_dir / "final-sale.cedar").write_text(NO_RETURNS_OF_AVIATORS)
    policies.reload()
    plan = plan_of(people, [step("s1", "return_item", {"item": "Aviator", "quantity": 1, "customer_name": "Alice"})])
    with pytest.raises(ServiceError, match="no-aviator-returns denies step s1: Aviators are final sale"):
        approve(plan, people["bob"])
    plan_decision_record(
        plan_id=plan.pk, actor=people["bob"], revision=plan.revision, content_hash=None, decision="rejected", comment="final sale"
    )
    assert Plan.objects.get(pk=plan.pk).status == Plan.Status.REJECTED


def test_the_plan_page_shows_which_policies_applied_to_each_step(policy_dir, people, client):
    (policy_dir / "finance.cedar").write_text(FINANCE_POLICY)
    policies.reload()
    plan = approve(plan_of(people, [purchase(3)]), people["erin"])
    client.force_login(people["frank"])
    page = client.get(f"/plans/{plan.pk}/").content.decode()
    assert "finance-purchases" in page and "Purchases over 100 need two approvers from finance." in page
    assert "high-risk-gate" in page
    assert "1 of 2 approvals (needs one more from group finance)" in page


def run_until_ready(plan, people):
    engine.plan_run(plan_id=plan.pk, actor=people["alice"])
    return {s.key: s for s in Step.objects.filter(plan=plan)}


def test_a_policy_can_gate_a_medium_step(policy_dir, people):
    (policy_dir / "gates.cedar").write_text(GATE_MEDIUM_EFFECTS)
    policies.reload()
    plan = approve(plan_of(people, [step("s1", "record_effect", {"label": "x"}), step("s2", "noop", {})]), people["bob"])
    steps = run_until_ready(plan, people)
    assert steps["s1"].status == Step.Status.WAITING_APPROVAL and steps["s2"].status == Step.Status.QUEUED


def test_without_a_policy_a_medium_step_runs_ungated_and_a_high_one_waits(policy_dir, people):
    plan = approve(plan_of(people, [step("s1", "record_effect", {"label": "x"}), step("s2", "high_effect", {"label": "y"})]), people["bob"])
    steps = run_until_ready(plan, people)
    assert steps["s1"].status == Step.Status.QUEUED and steps["s2"].status == Step.Status.WAITING_APPROVAL


def test_a_shadow_policy_is_recorded_but_not_enforced(policy_dir, people):
    (policy_dir / "final-sale.cedar").write_text("// mode: shadow\n" + NO_RETURNS_OF_AVIATORS)
    policies.reload()
    plan = approve(
        plan_of(people, [step("s1", "return_item", {"item": "Aviator", "quantity": 1, "customer_name": "Alice"})]), people["bob"]
    )
    assert plan.status == Plan.Status.APPROVED
    shadow = AuditEvent.objects.filter(action="plan.approved", plan_id=plan.pk).last().data["shadow_policies"]
    assert shadow == [
        {
            "step": "s1",
            "policy": "no-aviator-returns",
            "file": "final-sale.cedar",
            "action": "approve_plan",
            "effect": "forbid",
            "reason": "Aviators are final sale.",
        }
    ]


def test_a_bad_policy_is_reported_with_its_file_and_line(policy_dir):
    (policy_dir / "typo.cedar").write_text(FINANCE_POLICY + "\n\npermit (principal, action, resource)\nwhen { resource.amout > 1 };\n")
    errors = policies.check_policies()
    assert len(errors) == 1 and errors[0].path.endswith("typo.cedar") and errors[0].line == 10
    assert "amout" in str(errors[0])


FINANCE_DECIDES_PURCHASE_GATES = """
@id("finance-decides-purchases")
@reason("Only finance releases money.")
@groups("finance")
permit (principal, action == Action::"decide_gate", resource)
when { resource.tool == "purchase_item" };

@id("no-big-refund-gates")
@reason("Refunds over 150 go through the finance desk, not a gate.")
forbid (principal, action == Action::"decide_gate", resource)
when { resource.tool == "return_item" && resource has amount && resource.amount > 150 };
"""


def test_a_policy_names_who_may_approve_a_gate_and_forbids_some(policy_dir, people):
    (policy_dir / "gates.cedar").write_text(FINANCE_DECIDES_PURCHASE_GATES)
    policies.reload()
    plan = approve(
        plan_of(
            people,
            [purchase(1), step("s2", "return_item", {"item": "Aviator", "quantity": 2, "customer_name": "Alice"})],
        ),
        people["bob"],
    )
    steps = run_until_ready(plan, people)
    with pytest.raises(ServiceError, match="Only group finance may approve this gate"):
        gates.gate_answer(plan_id=plan.pk, key="s1", actor=people["bob"], approve=True, gate_hash=steps["s1"].gate_hash)
    gates.gate_answer(plan_id=plan.pk, key="s1", actor=people["erin"], approve=True, gate_hash=steps["s1"].gate_hash)
    with pytest.raises(ServiceError, match="no-big-refund-gates does not let you approve this gate: Refunds over 150"):
        gates.gate_answer(plan_id=plan.pk, key="s2", actor=people["erin"], approve=True, gate_hash=steps["s2"].gate_hash)
    gates.gate_answer(
        plan_id=plan.pk, key="s2", actor=people["bob"], approve=False, gate_hash=steps["s2"].gate_hash, comment="finance desk"
    )
    assert {s.key: s.status for s in Step.objects.filter(plan=plan)} == {"s1": Step.Status.QUEUED, "s2": Step.Status.SKIPPED}
