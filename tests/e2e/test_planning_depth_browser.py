"""Planning depth in a real browser (Chromium via Playwright, uvicorn, a real Celery worker planning
against the fake OpenAI server): alternatives side by side and chosen, a step decomposed, and a run's
facts ledger cited by its answer."""

import json
import subprocess

import pytest
from playwright.sync_api import expect

from approvals.models import AuditEvent
from planning.models import Plan
from tests.conftest import BIN, ROOT, make_user, stop_process, subprocess_env, wait_until
from tests.fixtures.plans import approved_plan, step
from tests.planning.test_alternatives import COMPARE_THEN_NOTIFY, REPORT_ONLY, REWORDED
from tests.planning.test_decompose_step import CHAIN, reviewed_plan

pytestmark = pytest.mark.e2e
PASSWORD = "e2e-pass-123"


@pytest.fixture(scope="module")
def asgi_server(django_db_setup, django_db_blocker, fake_openai_server, tmp_path_factory):
    """This module's web server has an LLM configured (the fake one), as Decompose needs: the shared
    server has none, which other browser tests rely on."""
    from project.devstack import free_port, wait_for_port

    port = free_port()
    log = tmp_path_factory.mktemp("asgi-llm") / "uvicorn.log"
    with django_db_blocker.unblock():
        env = subprocess_env(
            COUNTERSIGN_TOOL_MODULES="tests.tools",
            OPENAI_BASE_URL=fake_openai_server.base_url,
            OPENAI_API_KEY="sk-test",
            OPENAI_MAX_RETRIES="0",
        )
    command = [str(BIN / "uvicorn"), "project.asgi:application", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, timeout=60, process=process)
    except SystemExit as error:
        raise RuntimeError(f"{error}\n{log.read_text()}") from None
    yield f"http://127.0.0.1:{port}"
    stop_process(process)


@pytest.fixture
def people(transactional_db):
    alice, bob = make_user("alice", "operator"), make_user("bob", "approver")
    for user in (alice, bob):
        user.set_password(PASSWORD)
        user.save()
    return alice, bob


def test_alice_compares_alternatives_side_by_side_and_chooses_one(people, celery_worker, fake_openai_server, new_page):
    fake = fake_openai_server
    fake.reset()
    marked = json.loads(json.dumps(COMPARE_THEN_NOTIFY))
    marked["steps"][0]["title"] = "<b>Count</b> open tickets"
    for answer in (marked, REWORDED, REPORT_ONLY):
        fake.reply(json.dumps(answer))
    page = new_page("alice", PASSWORD)
    page.get_by_label("What should the agent do?").fill("Tell on-call if the support queue breaches its SLA")
    page.get_by_label("Drafts").select_option("3")
    page.get_by_role("button", name="Plan it").click()

    section = page.get_by_role("region", name="Alternatives")
    expect(section).to_be_visible(timeout=30_000)
    cards = section.locator("article.alternative")
    expect(cards).to_have_count(2)
    first, second = cards.nth(0).bounding_box(), cards.nth(1).bounding_box()
    assert first["y"] == second["y"] and second["x"] > first["x"] + first["width"] / 2, "side by side"
    best = cards.nth(0)
    expect(best).to_contain_text("1 step, no high-risk step")
    expect(cards.nth(1)).to_contain_text("<b>Count</b> open tickets")
    expect(cards.nth(1).locator(".badge.risk-high")).to_have_count(1)
    expect(cards.nth(1)).to_contain_text("notify_on_call")
    expect(page.locator("#plan-body .meta")).to_contain_text("Alternative (not chosen)")

    chosen_id = int(best.get_attribute("data-plan"))
    best.get_by_role("button", name=f"Choose plan {chosen_id}").click()
    page.wait_for_url(f"**/plans/{chosen_id}/")
    expect(page.get_by_text(f"Plan {chosen_id} is now the plan")).to_be_visible()
    expect(page.locator(f"#alternative-{chosen_id}")).to_contain_text("Awaiting approval")
    expect(page.locator("article.alternative.status-superseded")).to_have_count(1)
    assert Plan.objects.get(pk=chosen_id).status == Plan.Status.AWAITING_APPROVAL
    assert AuditEvent.objects.filter(action="plan.alternative_chosen", plan_id=chosen_id, actor_name="alice").exists()


def test_alice_decomposes_a_step_and_sees_the_sub_plan_as_a_new_revision(people, celery_worker, fake_openai_server, new_page):
    fake = fake_openai_server
    fake.reset()
    fake.reply(json.dumps(CHAIN))
    plan = reviewed_plan(*people)
    page = new_page("alice", PASSWORD)
    page.goto(f"/plans/{plan.pk}/")
    page.get_by_role("button", name="Decompose step s1").click()
    expect(page.get_by_text("The planner is decomposing s1")).to_be_visible()
    wait_until(lambda: Plan.objects.get(pk=plan.pk).revision == plan.revision + 1, timeout=30, message="the decomposed revision")
    page.goto(f"/plans/{plan.pk}/")
    expect(page.locator("ol.steps > li.step")).to_have_count(4)
    expect(page.locator("#step-s1")).to_have_count(0)
    expect(page.locator("#step-s3")).to_contain_text("{{ steps.s5.output }} tickets are open")
    page.goto(f"/plans/{plan.pk}/revisions/")
    expect(page.locator("body")).to_contain_text("Decomposed s1 into s4, s5")


def test_the_run_shows_its_facts_ledger_and_an_answer_citing_steps(people, celery_worker, fake_openai_server, new_page, demo_data):
    fake = fake_openai_server
    fake.reset()
    fake.reply("The report finds 3 overdue refunds.")
    fake.reply("3 refunds are overdue [s2]; aviators are in stock [s1].")
    plan = approved_plan(people, [step("s1", "search_inventory", {"keywords": ["aviator"]}), step("s2", "long_report")])
    page = new_page("alice", PASSWORD)
    page.goto(f"/plans/{plan.pk}/")
    expect(page.locator("#ledger-live")).to_be_attached()
    expect(page.locator("#ledger")).to_have_count(0)
    page.get_by_role("button", name="Run plan").click()
    # The ledger arrives over the websocket with the answer, without a reload.
    ledger = page.locator("#ledger")
    expect(ledger).to_be_visible(timeout=30_000)
    expect(ledger.locator("li")).to_have_count(2)
    expect(ledger.locator("#fact-s2")).to_contain_text("The report finds 3 overdue refunds.")
    expect(ledger.locator("#fact-s1")).to_contain_text("matching item(s)")
    citation = page.locator("#plan-answer a.cite", has_text="[s2]")
    expect(citation).to_have_attribute("href", "#step-s2")
    citation.click()
    assert page.url.endswith("#step-s2")
    page.reload()
    expect(page.locator("#ledger li")).to_have_count(2)
