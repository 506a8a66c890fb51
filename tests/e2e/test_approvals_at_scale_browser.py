"""In a real browser: a purchase over 100 needs two approvers from finance (its own server, with that policy
file), and bob's nav badge counts a new gate without a reload."""

import subprocess
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from approvals import policies
from planning.models import Plan
from tests.approvals.test_approval_policies import FINANCE_POLICY
from tests.conftest import BIN, ROOT, make_user, stop_process, subprocess_env
from tests.fixtures.plans import approved_plan, step

pytestmark = pytest.mark.e2e
PASSWORD = "e2e-pass-123"


@pytest.fixture(scope="module")
def finance_server(django_db_setup, django_db_blocker, tmp_path_factory):
    """The ASGI app under uvicorn with the shipped policies plus "purchases over 100 need two from finance"."""
    from project.devstack import free_port, wait_for_port

    directory = tmp_path_factory.mktemp("policies")
    (directory / "defaults.cedar").write_text((Path(policies.__file__).parent / "policies" / "defaults.cedar").read_text())
    (directory / "finance.cedar").write_text(FINANCE_POLICY)
    port = free_port()
    log = tmp_path_factory.mktemp("asgi-finance") / "uvicorn.log"
    with django_db_blocker.unblock():
        env = subprocess_env(COUNTERSIGN_TOOL_MODULES="tests.tools", COUNTERSIGN_POLICY_DIR=str(directory))
    process = subprocess.Popen(
        [str(BIN / "uvicorn"), "project.asgi:application", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    wait_for_port(port, timeout=60, process=process)
    yield f"http://127.0.0.1:{port}"
    stop_process(process)


def login(browser, base_url, username):
    context = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(base_url + "/")
    return page


def person(username, *groups):
    user = make_user(username, groups[0] if groups else None)
    for name in groups[1:]:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    user.set_password(PASSWORD)
    user.save()
    return user


def test_a_purchase_over_100_is_approved_only_by_the_second_finance_approver(transactional_db, browser, finance_server):
    from planning import services
    from planning.demo import seed_demo
    from planning.models import Goal
    from planning.validation import validate_plan

    seed_demo()
    alice = person("alice", "operator")
    person("erin", "approver", "finance")
    person("frank", "approver", "finance")
    plan = Plan.objects.create(goal=Goal.objects.create(text="Buy 3 Aviators", requester=alice), status=Plan.Status.AWAITING_APPROVAL)
    purchase = step("s1", "purchase_item", {"item": "Aviator", "quantity": 3, "customer_name": "Alice"})
    services.write_revision(plan, validate_plan({"steps": [purchase]}), author=None, planner="human", reason="test")

    erin = login(browser, finance_server, "erin")
    erin.goto(f"/plans/{plan.pk}/")
    expect(erin.locator("#step-policies-s1")).to_contain_text("finance-purchases")
    erin.get_by_role("button", name="Approve revision 1").click()
    erin.get_by_role("button", name="Yes, approve revision 1 with 1 HIGH step").click()
    expect(erin.locator("#approval-progress")).to_have_text("1 of 2 approvals (needs one more from group finance)")
    expect(erin.locator("#plan-live")).to_contain_text("Awaiting approval")
    expect(erin.locator("#policy-refusal")).to_contain_text("already approved")

    frank = login(browser, finance_server, "frank")
    frank.goto(f"/plans/{plan.pk}/")
    frank.get_by_role("button", name="Approve revision 1").click()
    frank.get_by_role("button", name="Yes, approve revision 1 with 1 HIGH step").click()
    expect(frank.locator("#plan-live")).to_contain_text("Approved")
    assert Plan.objects.get(pk=plan.pk).status == Plan.Status.APPROVED


def test_bobs_nav_badge_counts_a_new_gate_without_reload(transactional_db, new_page):
    alice, bob = person("alice", "operator"), person("bob", "approver")
    plan = approved_plan((alice, bob), [step("pay", "high_effect", {"label": "badge"})], goal="Pay the badge courier")
    inbox = new_page("bob", PASSWORD)
    # On any page, not only the inbox (which redraws it over its own socket).
    inbox.goto("/tables/")
    expect(inbox.locator("#nav-gates-badge")).to_be_hidden()
    inbox.wait_for_function("document.querySelector('[ws-connect]') && window.htmx")
    operator = new_page("alice", PASSWORD)
    operator.goto(f"/plans/{plan.pk}/")
    operator.get_by_role("button", name="Run plan").click()
    expect(inbox.locator("#nav-gates-badge")).to_have_text("1")
    inbox.goto("/")
    expect(inbox.locator("#nav-gates-badge")).to_have_text("1")
