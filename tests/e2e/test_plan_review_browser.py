"""Alice submits a goal, edits it, bob countersigns; four-eyes, voided approvals and stale tabs."""

import re

import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from planning.models import Goal, Plan
from tests.conftest import make_user

pytestmark = pytest.mark.e2e


def password(user):
    user.set_password("e2e-pass-123")
    user.save()
    return "e2e-pass-123"


@pytest.fixture
def people(transactional_db):
    from planning.demo import seed_demo

    seed_demo()
    alice, bob = make_user("alice", "operator"), make_user("bob", "approver")
    # Alice may approve too, so it is the four-eyes rule (not her role) that stops her approving her own goal.
    alice.groups.add(Group.objects.get(name="approver"))
    return {"alice": (alice, password(alice)), "bob": (bob, password(bob))}


def open_step_editor(page, key):
    page.get_by_role("button", name=f"Edit step {key}").click()
    return page.locator(f"#step-{key} form")


def test_alice_plans_edits_and_bob_countersigns(people, new_page, celery_worker):
    alice = new_page("alice", people["alice"][1])
    alice.get_by_label("What should the agent do?").fill("Return 2 Aviator sunglasses")
    alice.get_by_label("Planner").select_option("playbook")
    alice.get_by_role("button", name=re.compile("Plan it")).click()
    expect(alice.locator("#step-s2")).to_contain_text("Take back the pairs and refund")
    expect(alice.locator("#plan-live")).to_contain_text("revision 1")

    # Edit s2's arguments.
    form = open_step_editor(alice, "s2")
    expect(form.get_by_label("Title")).to_be_focused()
    form.get_by_label("Arguments (JSON)").fill('{"item": "{{ steps.s1.output.item_id }}", "quantity": 1, "customer_name": "Maria"}')
    form.get_by_role("button", name="Save step").click()
    expect(alice.locator("#plan-messages")).to_contain_text("Saved as revision 2")
    expect(alice.locator("#step-s2 pre.args")).to_contain_text('"customer_name": "Maria"')

    # Add a step and make it depend on s1.
    alice.get_by_text("Add a step").click()
    new = alice.locator("#step-new form")
    new.get_by_label("Title").fill("Check Aviator stock")
    new.get_by_label("Tool").select_option("search_inventory")
    new.get_by_label("Arguments (JSON)").fill('{"keywords": ["aviator"]}')
    new.get_by_label("s1").check()
    new.get_by_role("button", name="Add step").click()
    expect(alice.locator("#plan-messages")).to_contain_text("Saved as revision 3")
    expect(alice.locator("#step-s3")).to_contain_text("s1")

    # Alice requested the goal, so she may not countersign it.
    expect(alice.locator("#approvals")).to_contain_text("Four-eyes rule: you requested this goal")
    expect(alice.get_by_role("button", name=re.compile("Approve revision"))).to_have_count(0)

    plan = Plan.objects.get()
    bob = new_page("bob", people["bob"][1])
    bob.get_by_role("link", name="Return 2 Aviator sunglasses").click()
    bob.get_by_role("button", name="Approve revision 3").click()
    bob.get_by_role("button", name="Yes, approve revision 3 with 1 HIGH step").click()
    expect(bob.locator("#plan-live")).to_contain_text("Approved")
    expect(bob.locator("#approvals")).to_contain_text("bob approved revision 3")
    assert Plan.objects.get(pk=plan.pk).status == Plan.Status.APPROVED

    # An edit after bob's approval voids it, and the page says so.
    alice.reload()
    form = open_step_editor(alice, "s1")
    form.get_by_label("Title").fill("Look up the Aviator")
    form.get_by_role("button", name="Save step").click()
    expect(alice.locator("#plan-messages")).to_contain_text("Earlier approvals no longer apply")
    expect(alice.locator("#approvals")).to_contain_text("was voided: superseded by revision 4")
    expect(alice.locator("#plan-live")).to_contain_text("Awaiting approval")


def test_an_edit_from_a_stale_second_tab_gets_the_conflict_message(people, new_page):
    from planning import services

    alice_user = people["alice"][0]
    plan = services.plan_generate(
        plan_id=services.goal_submit(requester=alice_user, text="Return 2 Aviator sunglasses", planner_choice="playbook").pk
    )
    first = new_page("alice", people["alice"][1])
    second = first.context.new_page()
    first.goto(f"/plans/{plan.pk}/")
    second.goto(f"/plans/{plan.pk}/")

    form = open_step_editor(first, "s1")
    form.get_by_label("Title").fill("Edited in the first tab")
    form.get_by_role("button", name="Save step").click()
    expect(first.locator("#plan-messages")).to_contain_text("Saved as revision 2")

    second.get_by_role("button", name="Edit step s2").click()
    expect(second.locator("#plan-messages")).to_contain_text("This plan changed since you loaded it: revision 2 is current")
    expect(second.get_by_role("link", name="Reload the plan")).to_be_visible()
    expect(second.locator("#step-s2.editing")).to_have_count(0)

    # A form opened before the other tab saved is refused on save, and nothing of it is applied.
    third = first.context.new_page()
    third.goto(f"/plans/{plan.pk}/")
    form = open_step_editor(third, "s2")
    form.get_by_label("Title").fill("Edited in the stale form")
    form_first = open_step_editor(first, "s1")
    form_first.get_by_label("Title").fill("Edited again in the first tab")
    form_first.get_by_role("button", name="Save step").click()
    expect(first.locator("#plan-messages")).to_contain_text("Saved as revision 3")
    form.get_by_role("button", name="Save step").click()
    expect(third.locator("#plan-messages")).to_contain_text("This plan changed since you loaded it: revision 3 is current")
    assert plan.steps.get(key="s2").title == "Take back the pairs and refund"


def test_hostile_step_text_renders_inert_in_the_browser(people, new_page):
    alice_user = people["alice"][0]
    plan = Plan.objects.create(
        goal=Goal.objects.create(text="<script>window.pwned=1</script>", requester=alice_user),
        status=Plan.Status.AWAITING_APPROVAL,
        revision=1,
    )
    plan.steps.create(
        key="s1",
        title='<img src=x onerror="window.pwned=2">',
        description="<script>window.pwned=3</script>",
        tool="count_open_tickets",
        args={},
        risk="low",
    )
    page = new_page("alice", people["alice"][1])
    dialogs = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    page.goto(f"/plans/{plan.pk}/")
    expect(page.locator("#step-s1 .title")).to_have_text('<img src=x onerror="window.pwned=2">')
    assert page.evaluate("window.pwned === undefined")
    assert page.locator("#step-s1 img").count() == 0 and dialogs == []


def test_the_plan_page_fits_a_narrow_screen_and_keeps_a_30_step_graph_readable(people, new_page):
    from planning.models import content_hash_of

    alice_user = people["alice"][0]
    steps = [
        {
            "key": f"s{i}",
            "title": f"Step number {i}",
            "description": "",
            "tool": "count_open_tickets",
            "args": {"queue": "support"},
            "depends_on": [f"s{i - 1}"] if i % 5 else [],
            "condition": "",
            "success_criteria": "",
            "risk": "low",
        }
        for i in range(1, 33)
    ]
    plan = Plan.objects.create(
        goal=Goal.objects.create(text="Thirty-two steps", requester=alice_user),
        status=Plan.Status.AWAITING_APPROVAL,
        revision=1,
        content_hash=content_hash_of(steps),
    )
    from planning.models import Step

    Step.objects.bulk_create([Step(plan=plan, position=i, **s) for i, s in enumerate(steps)])
    page = new_page("alice", people["alice"][1])
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(f"/plans/{plan.pk}/")
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 392
    nodes = page.locator("svg.plan-graph g.node")
    expect(nodes).to_have_count(32)
    # Layered by dependency: nodes keep their full size (the graph scrolls instead of shrinking).
    # Measured in one step in the page: the websocket's redraw on connect may replace the graph between a
    # locator's lookup and its measurement.
    box = page.evaluate(
        "() => { const r = document.querySelector('svg.plan-graph g.node rect').getBoundingClientRect(); return {width: r.width, height: r.height}; }"
    )
    assert box["width"] >= 160 and box["height"] >= 40, box
