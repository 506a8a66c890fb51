"""A run seen live in the browser: statuses change without reload, and bob approves a gate on the page."""

import re

import pytest
from playwright.sync_api import expect

from planning.models import Plan, Step
from tests.conftest import make_user, wait_until
from tests.fixtures.plans import approved_plan, step

pytestmark = pytest.mark.e2e

RECORD_STATUSES = """
(key) => {
  window.seen = [];
  const record = () => {
    const badge = document.querySelector(`#step-live-${key} .badge`);
    const text = badge && badge.textContent.trim();
    if (text && window.seen[window.seen.length - 1] !== text) window.seen.push(text);
  };
  record();
  new MutationObserver(record).observe(document.body, {subtree: true, childList: true, characterData: true});
}
"""


def test_statuses_update_live_and_a_gate_is_approved_on_the_page(transactional_db, new_page, celery_worker):
    alice, bob = make_user("alice", "operator"), make_user("bob", "approver")
    for user in (alice, bob):
        user.set_password("e2e-pass-123")
        user.save()
    # Two workers' slots are taken by a and b, so c visibly waits in the queue before it runs.
    plan = approved_plan(
        (alice, bob),
        [
            step("a", "sleep_io", {"seconds": 1.5}),
            step("b", "sleep_io", {"seconds": 1.5}),
            # Long enough that "Running" is still true when a loaded server renders that event (a fragment
            # shows the state at render time, so a 1 s step could be seen already succeeded).
            step("c", "sleep_io", {"seconds": 3.0}),
            step("g", "high_effect", {"label": "browser"}, depends_on=["c"]),
        ],
    )
    page = new_page("alice", "e2e-pass-123")
    page.goto(f"/plans/{plan.pk}/")
    expect(page.locator("#step-live-c")).to_contain_text("Pending")
    page.wait_for_function("document.querySelector('[ws-connect]') && window.htmx")
    page.evaluate(RECORD_STATUSES, "c")
    page.get_by_role("button", name="Run plan").click()
    expect(page.locator("#step-live-c")).to_contain_text("Succeeded", timeout=20_000)
    seen = page.evaluate("window.seen")
    assert [s for s in seen if s in {"Queued", "Running", "Succeeded"}] == ["Queued", "Running", "Succeeded"], seen
    expect(page.locator("#plan-progress")).to_contain_text("3 of 4 steps finished")
    expect(page.locator("#step-live-g")).to_contain_text("Waiting for an approver")

    approver = new_page("bob", "e2e-pass-123")
    approver.goto(f"/plans/{plan.pk}/")
    gate = approver.locator("#step-live-g")
    expect(gate).to_contain_text('"label": "browser"')
    gate.get_by_role("button", name="Approve g").click()
    # First the worker's side (so a failure says whether the step or its live update is missing).
    try:
        wait_until(lambda: Step.objects.get(plan=plan, key="g").status == Step.Status.SUCCEEDED, timeout=30, message="g to succeed")
    except AssertionError:
        g = Step.objects.get(plan=plan, key="g")
        raise AssertionError(f"g is {g.status} ({g.note or g.error}); worker log:\n{celery_worker.log_path.read_text()[-6000:]}") from None
    expect(approver.locator("#step-live-g")).to_contain_text("Succeeded", timeout=20_000)
    expect(page.locator("#step-live-g")).to_contain_text("Succeeded", timeout=20_000)
    expect(page.locator("#plan-live")).to_contain_text("Succeeded")
    expect(page.locator("#plan-answer")).to_contain_text(re.compile("."), timeout=20_000)
    assert Plan.objects.get(pk=plan.pk).status == Plan.Status.SUCCEEDED
