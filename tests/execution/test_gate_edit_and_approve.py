"""At a runtime gate an approver corrects the call and approves it in one decision: the edited arguments are
validated against the tool and the policies, get a new gate hash, and the trail keeps both versions. The gate
shows an item's name beside its id."""

import json

import pytest
from django.test import Client
from django.urls import reverse

from approvals import policies
from approvals.audit import verify
from approvals.models import Approval, AuditEvent
from core.errors import ServiceError
from execution import gates
from planning.models import Step
from tests.approvals import test_approval_policies as policy_tests
from tests.approvals.test_approval_policies import FINANCE_POLICY, approve, plan_of, purchase, run_until_ready

# The policy tests' fixtures, shared: a policy directory with the shipped defaults, and alice, bob, erin, frank.
policy_dir = policy_tests.policy_dir
people = policy_tests.people

HTMX = {"HX-Request": "true"}


def waiting_purchase(people, quantity=1):
    plan = approve(plan_of(people, [purchase(quantity)]), people["bob"])
    steps = run_until_ready(plan, people)
    assert steps["s1"].status == Step.Status.WAITING_APPROVAL
    return plan, steps["s1"]


def test_edit_and_approve_runs_the_edited_call_under_a_new_gate_hash_and_records_both(policy_dir, people):
    plan, gate = waiting_purchase(people, quantity=1)
    edited = {"item": "Aviator", "quantity": 1, "customer_name": "Alice Liddell"}
    gates.gate_answer(plan_id=plan.pk, key="s1", actor=people["erin"], approve=True, gate_hash=gate.gate_hash, args=edited)

    step = Step.objects.get(pk=gate.pk)
    assert step.status == Step.Status.QUEUED and step.resolved_args == edited
    assert step.gate_hash and step.gate_hash != gate.gate_hash
    approval = Approval.objects.get(step=step, kind=Approval.Kind.GATE)
    assert approval.content_hash == step.gate_hash and approval.approver == people["erin"]
    event = AuditEvent.objects.get(action="gate.approved", plan_id=plan.pk)
    assert event.data["edited"] is True and event.data["resolved_args"] == edited
    assert event.data["original_args"] == gate.resolved_args and event.data["original_gate_hash"] == gate.gate_hash
    assert verify()["ok"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"item": "Aviator", "quantity": "many", "customer_name": "Alice"}, "do not fit the tool"),
        ({"item": "Aviator", "quantity": 1, "customer_name": "Alice", "deliver_to": "x"}, "do not fit the tool"),
        ({"item": "Aviator", "quantity": 1, "customer_name": "Al\x00ice"}, "customer_name"),
    ],
)
def test_edited_arguments_that_do_not_fit_are_refused_and_the_gate_is_unchanged(policy_dir, people, args, message):
    plan, gate = waiting_purchase(people)
    with pytest.raises(ServiceError, match=message) as refused:
        gates.gate_answer(plan_id=plan.pk, key="s1", actor=people["erin"], approve=True, gate_hash=gate.gate_hash, args=args)
    assert refused.value.status == 422
    step = Step.objects.get(pk=gate.pk)
    assert (step.status, step.resolved_args, step.gate_hash) == (Step.Status.WAITING_APPROVAL, gate.resolved_args, gate.gate_hash)
    assert not Approval.objects.filter(step=step).exists()


def test_an_edit_that_a_policy_would_send_to_two_approvers_is_refused(policy_dir, people):
    (policy_dir / "finance.cedar").write_text(FINANCE_POLICY)
    policies.reload()
    plan, gate = waiting_purchase(people, quantity=1)
    bigger = {**gate.resolved_args, "quantity": 3}
    with pytest.raises(ServiceError, match="needs 2 approvers"):
        gates.gate_answer(plan_id=plan.pk, key="s1", actor=people["erin"], approve=True, gate_hash=gate.gate_hash, args=bigger)
    step = Step.objects.get(pk=gate.pk)
    assert step.resolved_args == gate.resolved_args and step.status == Step.Status.WAITING_APPROVAL


def test_an_edit_of_a_stale_gate_or_with_a_denial_is_refused(policy_dir, people):
    plan, gate = waiting_purchase(people)
    with pytest.raises(ServiceError, match="not the ones waiting"):
        gates.gate_answer(plan_id=plan.pk, key="s1", actor=people["erin"], approve=True, gate_hash="0" * 64, args=gate.resolved_args)
    with pytest.raises(ServiceError, match="come with an approval"):
        gates.gate_answer(plan_id=plan.pk, key="s1", actor=people["erin"], approve=False, gate_hash=gate.gate_hash, args=gate.resolved_args)


def test_the_gate_shows_the_items_name_and_an_edit_form_and_the_form_approves_the_edit(policy_dir, people):
    plan, gate = waiting_purchase(people)
    client = Client()
    client.force_login(people["erin"])
    page = client.get(reverse("plan_detail", args=[plan.pk])).content.decode()
    assert "<dd>Aviator (SG001), 80 each, 23 in stock</dd>" in page
    assert "Edit arguments and approve" in page and 'name="args"' in page

    url = reverse("gate_decide", args=[plan.pk, "s1"])
    broken = client.post(url, {"approve": "edit", "gate_hash": gate.gate_hash, "args": "{not json"}, headers=HTMX)
    assert broken.status_code == 422 and "not valid JSON" in broken.content.decode()
    edited = {**gate.resolved_args, "customer_name": "Alice L."}
    done = client.post(url, {"approve": "edit", "gate_hash": gate.gate_hash, "args": json.dumps(edited)}, headers=HTMX)
    assert done.status_code == 204
    assert Step.objects.get(pk=gate.pk).resolved_args == edited


def test_the_api_edits_and_approves_a_gate(policy_dir, people):
    plan, gate = waiting_purchase(people)
    client = Client()
    client.force_login(people["erin"])
    edited = {**gate.resolved_args, "customer_name": "Alice API"}
    response = client.post(
        f"/api/plans/{plan.pk}/steps/s1/decision",
        {"approve": True, "gate_hash": gate.gate_hash, "args": edited},
        content_type="application/json",
    )
    assert response.status_code == 200 and response.json()["status"] == "queued"
    assert Step.objects.get(pk=gate.pk).resolved_args == edited
