"""Two tabs: alice runs a plan on its page while bob watches his inbox; the new gate, the tab counts and
the plan's status reach bob without a reload, and alice's graph follows the run."""

import pytest
from playwright.sync_api import expect

from tests.conftest import make_user
from tests.fixtures.plans import approved_plan, step

pytestmark = pytest.mark.e2e


def test_bobs_inbox_shows_a_new_gate_without_reload(transactional_db, new_page):
    alice, bob = make_user("alice", "operator"), make_user("bob", "approver")
    for user in (alice, bob):
        user.set_password("e2e-pass-123")
        user.save()
    plan = approved_plan((alice, bob), [step("pay", "high_effect", {"label": "live inbox"})], goal="Pay the courier")

    inbox = new_page("bob", "e2e-pass-123")
    expect(inbox.locator("#plan-list nav.tabs")).to_contain_text("Running 0")
    expect(inbox.locator("#gates")).to_be_hidden()
    inbox.wait_for_function("document.querySelector('[ws-connect]') && window.htmx")

    operator = new_page("alice", "e2e-pass-123")
    operator.goto(f"/plans/{plan.pk}/")
    expect(operator.locator("#plan-graph .node.status-pending")).to_have_count(1)
    operator.get_by_role("button", name="Run plan").click()

    expect(inbox.locator("#gates")).to_contain_text("Pay the courier")
    expect(inbox.locator(f"#gate-{plan.pk}-pay")).to_contain_text("pay")
    expect(inbox.locator("#plan-list nav.tabs")).to_contain_text("Running 1")
    # The graph's node follows the step into its gate on alice's page, also without a reload.
    expect(operator.locator("#plan-graph .node.status-waiting_approval")).to_have_count(1)
