"""bob reads every step before the decision buttons, and approving HIGH steps asks once more, naming
them; all of it by keyboard, with and without JavaScript."""

import pytest
from playwright.sync_api import expect

from planning import services
from planning.models import Goal, Plan
from planning.validation import validate_plan
from tests.conftest import make_user
from tests.fixtures.plans import step

pytestmark = pytest.mark.e2e


@pytest.fixture
def plan_with_a_high_step(transactional_db):
    alice, bob = make_user("alice", "operator"), make_user("bob", "approver")
    bob.set_password("e2e-pass-123")
    bob.save()
    plan = Plan.objects.create(goal=Goal.objects.create(text="Pay the supplier", requester=alice), planner="human")
    steps = [step("look", "noop"), step("pay", "high_effect", {"label": "supplier"}, depends_on=["look"])]
    services.write_revision(plan, validate_plan({"steps": steps}), author=None, planner="playbook", reason="proposed")
    return plan


def test_the_steps_come_before_the_decision_and_high_steps_are_confirmed_by_keyboard(plan_with_a_high_step, new_page):
    page = new_page("bob", "e2e-pass-123")
    page.goto(f"/plans/{plan_with_a_high_step.pk}/")
    approve = page.get_by_role("button", name="Approve revision 1")
    # Reading order (and so tab order, with no positive tabindex on the page) passes the last step first.
    assert page.evaluate(
        "() => !!(document.querySelector('#step-pay').compareDocumentPosition(document.querySelector('#approvals'))"
        " & Node.DOCUMENT_POSITION_FOLLOWING)"
    )
    assert page.locator("[tabindex]:not([tabindex='-1']):not([tabindex='0'])").count() == 0
    approve.focus()
    page.keyboard.press("Enter")

    confirm = page.get_by_role("alertdialog")
    expect(confirm).to_contain_text("1 HIGH-risk step")
    expect(confirm).to_contain_text("pay high_effect pay (high_effect)")
    yes = confirm.get_by_role("button", name="Yes, approve revision 1 with 1 HIGH step")
    expect(yes).to_be_focused()
    assert Plan.objects.get(pk=plan_with_a_high_step.pk).status == Plan.Status.AWAITING_APPROVAL
    page.keyboard.press("Enter")
    expect(page.locator("#plan-live")).to_contain_text("Approved")


def test_without_javascript_the_confirmation_is_a_server_page(plan_with_a_high_step, browser, asgi_server):
    context = browser.new_context(base_url=asgi_server, java_script_enabled=False)
    page = context.new_page()
    page.goto("/login/")
    page.get_by_label("Username").fill("bob")
    page.get_by_label("Password").fill("e2e-pass-123")
    page.get_by_role("button", name="Log in").click()
    page.goto(f"/plans/{plan_with_a_high_step.pk}/")
    page.get_by_role("button", name="Approve revision 1").click()
    page.get_by_role("button", name="Yes, approve revision 1 with 1 HIGH step").click()
    expect(page.locator("#plan-live")).to_contain_text("Approved")
    context.close()
