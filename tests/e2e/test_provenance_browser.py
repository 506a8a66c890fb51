"""In a real browser: bob opens a gate whose address a web page supplied and reads, before deciding, that
the value came from that page and is untrusted; the preflight panel had said so at review."""

import pytest
from playwright.sync_api import expect

from execution import engine
from planning.models import Step
from tests.conftest import make_user, wait_until
from tests.execution.test_provenance import ATTACKER, page_url  # noqa: F401 - the page server fixture
from tests.fixtures.plans import approved_plan, step

pytestmark = pytest.mark.e2e
PASSWORD = "e2e-pass-123"


def test_bob_reads_at_the_gate_that_the_address_came_from_an_untrusted_page(transactional_db, new_page, celery_worker, page_url):  # noqa: F811
    alice, bob = make_user("alice", "operator"), make_user("bob", "approver")
    bob.set_password(PASSWORD)
    bob.save()
    plan = approved_plan(
        (alice, bob),
        [
            step("s1", "http_get", {"url": f"{page_url}/address"}),
            step("s2", "send_email", {"to": "{{ steps.s1.output.text }}", "subject": "Report", "body": "Attached."}, depends_on=["s1"]),
        ],
        comment="The address is checked at the gate.",
    )
    engine.plan_run(plan_id=plan.pk, actor=alice)
    wait_until(lambda: Step.objects.get(plan=plan, key="s2").status == Step.Status.WAITING_APPROVAL, timeout=30, message="the gate")

    page = new_page("bob", PASSWORD)
    page.goto(f"/plans/{plan.pk}/")
    provenance = page.locator("#provenance-s2")
    expect(provenance).to_contain_text("Untrusted data reaches this call (to)")
    expect(provenance).to_contain_text(f"to ← s1 http_get {page_url}/address (untrusted)")
    expect(page.locator("#step-live-s2 pre.args")).to_contain_text(ATTACKER)
    expect(page.locator("#preflight")).to_contain_text("to comes from untrusted data: s1 (http_get)")
    expect(page.locator("#plan-graph .data-flow summary")).to_contain_text("1 untrusted into a risky step")
    expect(page.locator("#plan-graph path.data-edge.untrusted")).to_have_count(1)
