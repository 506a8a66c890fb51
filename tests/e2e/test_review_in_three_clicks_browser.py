"""The review a typical plan gets: six steps, two edited by the operator. On one page, without opening
anything, bob sees every step's risk and every change since the planner's proposal, and he approves it
from the inbox in three clicks (open, approve, confirm the HIGH step)."""

import pytest
from playwright.sync_api import expect

from planning import services
from planning.models import Goal, Plan
from planning.validation import validate_plan
from tests.conftest import make_user
from tests.fixtures.plans import step

pytestmark = pytest.mark.e2e
PASSWORD = "e2e-pass-123"


def person(username, role):
    user = make_user(username, role)
    user.set_password(PASSWORD)
    user.save()
    return user


def test_six_steps_two_edited_reviewed_on_one_page_and_approved_in_three_clicks(transactional_db, new_page):
    alice, _ = person("alice", "operator"), person("bob", "approver")
    plan = Plan.objects.create(goal=Goal.objects.create(text="Weekly effects", requester=alice), status=Plan.Status.AWAITING_APPROVAL)
    proposal = [
        step("s1", "noop", {"value": 1}),
        step("s2", "noop", {"value": 2}, depends_on=["s1"]),
        step("s3", "record_effect", {"label": "first"}, depends_on=["s2"]),
        step("s4", "record_effect", {"label": "second"}, depends_on=["s2"]),
        step("s5", "noop", {"value": 5}, depends_on=["s3", "s4"]),
        step("s6", "high_effect", {"label": "pay"}, depends_on=["s5"]),
    ]
    services.write_revision(plan, validate_plan({"steps": proposal}), author=None, planner="llm", reason="proposal")
    services.step_update(plan_id=plan.pk, actor=alice, revision=1, key="s3", changes={"args": {"label": "first, corrected"}})
    services.step_update(plan_id=plan.pk, actor=alice, revision=2, key="s6", changes={"args": {"label": "pay the courier"}})

    bob = new_page("bob", PASSWORD)
    clicks = 0
    bob.get_by_role("link", name="Weekly effects").click()
    clicks += 1
    expect(bob.locator("#plan-live")).to_contain_text("revision 3")
    # One page, nothing to expand: each step's risk, and both changes with their old and new values.
    for key, risk in [("s1", "LOW"), ("s2", "LOW"), ("s3", "MEDIUM"), ("s4", "MEDIUM"), ("s5", "LOW"), ("s6", "HIGH")]:
        expect(bob.locator(f"#step-{key} .badge.risk-{risk.lower()}").first).to_be_visible()
    changes = bob.locator("#proposal-changes")
    expect(changes).to_be_visible()
    expect(changes).to_contain_text("s3")
    expect(changes).to_contain_text("first, corrected")
    expect(changes).to_contain_text("s6")
    expect(changes).to_contain_text("pay the courier")
    expect(changes).not_to_contain_text("s4")

    bob.get_by_role("button", name="Approve revision 3").click()
    clicks += 1
    bob.get_by_role("button", name="Yes, approve revision 3 with 1 HIGH step").click()
    clicks += 1
    expect(bob.locator("#plan-live")).to_contain_text("Approved")
    assert clicks <= 3 and Plan.objects.get(pk=plan.pk).status == Plan.Status.APPROVED
