"""bob reads, on the approval card itself, what alice changed since the planner's proposal."""

import pytest
from playwright.sync_api import expect

from planning import services
from tests.conftest import make_user
from tests.planning.test_changes_since_proposal import proposed_plan

pytestmark = pytest.mark.e2e


def test_bob_reads_the_changes_panel_on_the_approval_card(transactional_db, new_page):
    alice, bob = make_user("alice", "operator"), make_user("bob", "approver")
    bob.set_password("e2e-pass-123")
    bob.save()
    plan = proposed_plan(alice)
    services.step_update(plan_id=plan.pk, actor=alice, revision=1, key="s2", changes={"args": {"label": "refund", "seconds": 2}})

    page = new_page("bob", "e2e-pass-123")
    page.goto(f"/plans/{plan.pk}/")
    panel = page.locator("#approvals").get_by_role("region", name="Changes since the planner’s proposal")
    expect(panel).to_contain_text("s2 changed by alice")
    expect(panel.locator("dt", has_text="args.seconds")).to_be_visible()
    expect(panel.locator("ins")).to_have_text("2")
    expect(panel.locator("del")).to_have_text("0")
