"""Preflight: every new revision is checked before review. Each check is shown firing on a plan that has
the problem and staying quiet on the same plan without it; findings reach the page and the API, and a
HIGH finding makes the approver say why in a comment."""

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import AuditEvent
from core.errors import ServiceError
from planning import services
from planning.models import Goal, Plan, Step
from planning.review import plan_decision_record
from planning.validation import validate_plan
from tests.conftest import make_user
from tests.fixtures.plans import step


@pytest.fixture
def people(db):
    return make_user("alice", "operator"), make_user("bob", "approver")


def plan_with(people, steps) -> Plan:
    plan = Plan.objects.create(goal=Goal.objects.create(text="Preflight", requester=people[0]), status=Plan.Status.AWAITING_APPROVAL)
    services.write_revision(plan, validate_plan({"steps": steps}), author=None, planner="human", reason="test")
    return Plan.objects.get(pk=plan.pk)


def checks(plan) -> set[tuple[str, str, str]]:
    return {(f["check"], f["severity"], f["step"]) for f in plan.preflight}


def verified(key, tool="high_effect", args=None, **extra):
    """A HIGH step after a read, with success criteria: nothing for the HIGH-step checks to say."""
    return {**step(key, tool, args or {"label": key}, depends_on=["read"]), "success_criteria": "the effect row exists", **extra}


READ = step("read", "noop", {"value": 1})


def test_untrusted_data_into_a_risky_step(people):
    page = step("page", "http_get", {"url": "https://example.org/"})
    fed = plan_with(people, [READ, page, verified("pay", args={"label": "{{ steps.page.output.text }}"}, depends_on=["read", "page"])])
    assert ("untrusted_into_risky", "high", "pay") in checks(fed)
    medium = plan_with(people, [page, step("note", "record_effect", {"label": "{{ steps.page.output.text }}"}, depends_on=["page"])])
    assert ("untrusted_into_risky", "medium", "note") in checks(medium)
    literal = plan_with(people, [READ, page, verified("pay", depends_on=["read", "page"])])
    assert not any(check == "untrusted_into_risky" for check, _, _ in checks(literal))


def test_a_high_step_with_no_read_before_it(people):
    assert ("high_without_verification", "medium", "pay") in checks(plan_with(people, [step("pay", "high_effect", {"label": "x"})]))
    assert "high_without_verification" not in {c for c, _, _ in checks(plan_with(people, [READ, verified("pay")]))}


def test_a_high_step_without_success_criteria(people):
    bare = plan_with(people, [READ, {**verified("pay"), "success_criteria": ""}])
    assert ("high_without_success_criteria", "medium", "pay") in checks(bare)
    assert "high_without_success_criteria" not in {c for c, _, _ in checks(plan_with(people, [READ, verified("pay")]))}


def test_two_parallel_steps_that_change_the_same_resource(people):
    same = [READ, verified("a", args={"label": "ledger"}), verified("b", args={"label": "ledger"})]
    # high_effect's only argument is "label", which names no resource; record_effect on one key does.
    racing = plan_with(
        people,
        [
            step("a", "purchase_item", {"item": "Aviator", "quantity": 1, "customer_name": "Ann"}),
            step("b", "return_item", {"item": "aviator", "quantity": 1, "customer_name": "Bo"}),
            step("c", "purchase_item", {"item": "Aviator", "quantity": 2, "customer_name": "Cy"}),
        ],
    )
    assert ("parallel_same_resource", "high", "c") in checks(racing)
    ordered = plan_with(
        people,
        [
            step("a", "purchase_item", {"item": "Aviator", "quantity": 1, "customer_name": "Ann"}),
            step("c", "purchase_item", {"item": "Aviator", "quantity": 2, "customer_name": "Cy"}, depends_on=["a"]),
        ],
    )
    assert "parallel_same_resource" not in {c for c, _, _ in checks(ordered)}
    assert "parallel_same_resource" not in {c for c, _, _ in checks(plan_with(people, same))}


def test_a_condition_that_reads_no_output_is_always_the_same(people):
    constant = plan_with(people, [READ, step("maybe", "noop", {"value": 2}, depends_on=["read"], condition="2 > 3")])
    assert ("constant_condition", "medium", "maybe") in checks(constant)
    assert any("always false" in f["message"] for f in constant.preflight)
    real = plan_with(people, [READ, step("maybe", "noop", {"value": 2}, depends_on=["read"], condition="steps.read.output > 0")])
    assert "constant_condition" not in {c for c, _, _ in checks(real)}


def test_a_number_far_outside_earlier_runs(people):
    earlier = plan_with(people, [step("s1", "noop", {"value": 1})])
    for n in range(4):
        Step.objects.create(
            plan=earlier, key=f"h{n}", position=n + 1, title="h", tool="noop", status="succeeded", resolved_args={"value": 3 + n}
        )
    assert ("unusual_argument", "high", "big") in checks(plan_with(people, [step("big", "noop", {"value": 500})]))
    assert "unusual_argument" not in {c for c, _, _ in checks(plan_with(people, [step("ok", "noop", {"value": 12})]))}


def test_a_recipient_outside_the_organisation(people, settings):
    settings.COUNTERSIGN_ORG_DOMAINS = ["example.com"]
    mail = lambda to: step("mail", "send_email", {"to": to, "subject": "Hi", "body": "Report"})  # noqa: E731
    assert ("recipient_outside_organisation", "high", "mail") in checks(plan_with(people, [mail("someone@elsewhere.net")]))
    assert "recipient_outside_organisation" not in {c for c, _, _ in checks(plan_with(people, [mail("ops@example.com")]))}


def test_a_high_finding_needs_a_comment_that_is_stored_with_the_approval(people, settings):
    settings.COUNTERSIGN_ORG_DOMAINS = ["example.com"]
    plan = plan_with(people, [step("mail", "send_email", {"to": "x@elsewhere.net", "subject": "Hi", "body": "Report"})])
    bob = people[1]
    with pytest.raises(ServiceError, match="Say in a comment why") as refused:
        plan_decision_record(plan_id=plan.pk, actor=bob, revision=1, content_hash=plan.content_hash, decision="approved")
    assert refused.value.status == 422 and Plan.objects.get(pk=plan.pk).status == Plan.Status.AWAITING_APPROVAL
    approval = plan_decision_record(
        plan_id=plan.pk, actor=bob, revision=1, content_hash=plan.content_hash, decision="approved", comment="Our auditor's address."
    )
    assert approval.comment == "Our auditor's address."
    event = AuditEvent.objects.get(action="plan.approved", plan_id=plan.pk)
    assert event.data["preflight_high"] == ["mail: recipient_outside_organisation"]


def test_findings_are_on_the_page_per_step_and_in_the_api(people):
    plan = plan_with(people, [step("pay", "high_effect", {"label": "x"})])
    client = Client()
    client.force_login(people[1])
    page = client.get(reverse("plan_detail", args=[plan.pk])).content.decode()
    assert 'id="preflight"' in page and "Preflight: 2 findings" in page
    step_card = page[page.index('id="step-pay"') :]
    assert "Preflight medium</span> No read step before it" in step_card
    api = client.get(f"/api/plans/{plan.pk}").json()
    assert {f["check"] for f in api["preflight"]} == {"high_without_verification", "high_without_success_criteria"}
    assert all(f["fix"] for f in api["preflight"])


def test_an_edit_recomputes_the_findings(people):
    plan = plan_with(people, [READ, {**verified("pay"), "success_criteria": ""}])
    assert "high_without_success_criteria" in {c for c, _, _ in checks(plan)}
    services.step_update(plan_id=plan.pk, actor=people[0], revision=1, key="pay", changes={"success_criteria": "paid"})
    assert "high_without_success_criteria" not in {c for c, _, _ in checks(Plan.objects.get(pk=plan.pk))}
