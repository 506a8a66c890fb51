"""In a real browser: bob fixes a step during review (and the page tells him someone else must countersign),
then, at the run's gate, erin corrects the call's arguments and approves it in one go; the edited call runs."""

import json

import pytest
from playwright.sync_api import expect

from planning import broadcast
from planning.models import Step
from tests.conftest import make_user
from tests.e2e.test_plan_review_browser import open_step_editor
from tests.fixtures.plans import approved_plan, step

pytestmark = pytest.mark.e2e
PASSWORD = "e2e-pass-123"


def person(username, role):
    user = make_user(username, role)
    user.set_password(PASSWORD)
    user.save()
    return user


def test_an_approver_edits_arguments_at_the_gate_and_the_edited_call_runs(transactional_db, new_page, celery_worker):
    alice, bob = person("alice", "operator"), person("bob", "approver")
    person("erin", "approver")
    plan = approved_plan((alice, bob), [step("g", "high_effect", {"label": "typo-lable"})])
    operator = new_page("alice", PASSWORD)
    operator.goto(f"/plans/{plan.pk}/")
    operator.get_by_role("button", name="Run plan").click()
    expect(operator.locator("#step-live-g")).to_contain_text("Waiting for an approver")

    erin = new_page("erin", PASSWORD)
    erin.goto(f"/plans/{plan.pk}/")
    gate = erin.locator("#step-live-g")
    gate.get_by_text("Edit arguments and approve…").click()
    gate.get_by_label("Arguments for high_effect").fill(json.dumps({"label": "fixed label"}))
    # A live redraw of the step while she types (another viewer's action would cause one) keeps her edit.
    erin.wait_for_function("document.querySelector('[ws-connect]') && window.htmx")
    broadcast.announce(plan.pk, all_steps=True, log="Redrawn while typing")
    expect(erin.locator("#plan-log")).to_contain_text("Redrawn while typing")
    expect(gate.get_by_label("Arguments for high_effect")).to_have_value(json.dumps({"label": "fixed label"}))
    gate.get_by_role("button", name="Approve g with these arguments").click()
    expect(erin.locator("#step-live-g")).to_contain_text("Succeeded", timeout=20_000)
    assert Step.objects.get(plan=plan, key="g").resolved_args == {"label": "fixed label"}


def test_an_approver_edits_a_step_during_review_and_is_told_another_must_countersign(transactional_db, new_page):
    from planning import services
    from planning.models import Goal, Plan
    from planning.validation import validate_plan

    alice = person("alice", "operator")
    person("bob", "approver")
    plan = Plan.objects.create(goal=Goal.objects.create(text="Record one effect", requester=alice), status=Plan.Status.AWAITING_APPROVAL)
    services.write_revision(plan, validate_plan({"steps": [step("s1", "noop", {})]}), author=None, planner="human", reason="test")

    page = new_page("bob", PASSWORD)
    page.goto(f"/plans/{plan.pk}/")
    form = open_step_editor(page, "s1")
    form.get_by_label("Title").fill("Do nothing, carefully")
    form.get_by_role("button", name="Save step").click()
    expect(page.locator("#plan-messages")).to_contain_text("another approver must countersign")
    expect(page.locator("main")).to_contain_text("you edited this plan, so someone else must approve it")
