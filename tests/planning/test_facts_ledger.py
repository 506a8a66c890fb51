"""The facts ledger: a short summary per finished step, made by the tool's declared summary, kept whole
when short, or written by the LLM (the fake OpenAI server, through the real SDK) when long; answers and
replans are written from it, and the answer cites the steps it relies on."""

import json

import pytest

from approvals.models import AuditEvent
from execution import aftermath, engine
from planning import ledger
from planning.models import Fact, LlmCall, Plan, Step
from tests.conftest import make_user, wait_until
from tests.fixtures.plans import approved_plan, step

SUMMARY = "The report finds 3 overdue refunds."


@pytest.fixture
def people(db):
    return make_user("alice", "operator"), make_user("bob", "approver")


@pytest.fixture
def committed_people(transactional_db):
    return make_user("alice", "operator"), make_user("bob", "approver")


def ran(plan, outputs: dict, failed: dict = (), status=Plan.Status.SUCCEEDED):
    """A plan as a run leaves it (the worker's part is tested end to end below)."""
    Plan.objects.filter(pk=plan.pk).update(status=status)
    for key, output in outputs.items():
        Step.objects.filter(plan=plan, key=key).update(status=Step.Status.SUCCEEDED, output=output)
    for key, error in dict(failed).items():
        Step.objects.filter(plan=plan, key=key).update(status=Step.Status.FAILED, error=error)
    return plan


def test_a_run_keeps_a_fact_per_step_and_its_answer_cites_the_steps(committed_people, celery_worker, fake_openai_server, demo_data, client):
    fake = fake_openai_server
    fake.reset()
    alice, _ = committed_people
    plan = approved_plan(
        committed_people,
        [step("s1", "search_inventory", {"keywords": ["aviator"]}), step("s2", "long_report"), step("s3", "noop", {"value": 7})],
    )
    fake.reply(SUMMARY)
    fake.reply("Aviators are in stock [s1] and 3 refunds are overdue [s2], says [s9].")
    engine.plan_run(plan_id=plan.pk, actor=alice)
    plan = wait_until(lambda: Plan.objects.filter(pk=plan.pk).exclude(answer_text="").first(), timeout=30, message="the answer")

    facts = {fact.step_key: fact for fact in Fact.objects.filter(plan=plan)}
    assert facts["s1"].method == "tool" and "matching item(s): Aviator" in facts["s1"].summary
    assert (facts["s2"].method, facts["s2"].summary) == ("llm", SUMMARY)
    assert (facts["s3"].method, facts["s3"].summary) == ("verbatim", "7")
    asked = fake.requests[-1]["body"]["messages"][-1]["content"]
    assert f'<fact step="s2" status="succeeded" trust="trusted" title="long_report s2">\n{SUMMARY}\n</fact>' in asked
    assert "Routine line. Routine line." not in asked
    assert "square brackets" in asked
    assert plan.answer_text == "Aviators are in stock [s1] and 3 refunds are overdue [s2], says s9."
    assert AuditEvent.objects.get(action="plan.answered", plan_id=plan.pk).data["cites"] == ["s1", "s2"]

    client.force_login(alice)
    page = client.get(f"/plans/{plan.pk}/").content.decode()
    assert 'id="ledger"' in page and SUMMARY in page
    assert '<a href="#step-s1" class="cite">[s1]</a>' in page
    api = client.get(f"/api/plans/{plan.pk}").json()
    assert {"step": "s2", "title": "long_report s2", "status": "succeeded", "fact": SUMMARY, "method": "llm", "trusted": True} in api[
        "ledger"
    ]


def test_a_replan_is_written_from_the_ledger_not_the_raw_outputs(people, fake_openai):
    plan = approved_plan(people, [step("s1", "long_report"), step("s2", "always_fail", depends_on=["s1"])])
    long_output = "Routine line. " * 200 + "FINDING: 3 refunds are overdue."
    ran(plan, {"s1": long_output}, {"s2": "upstream unavailable"}, status=Plan.Status.FAILED)
    fake_openai.reply(SUMMARY)
    fake_openai.reply(json.dumps({"steps": [{"key": "s3", "title": "Try again", "tool": "noop", "args": {}, "depends_on": ["s1"]}]}))
    replanned = aftermath.replan(plan.pk)
    assert replanned.status == Plan.Status.AWAITING_APPROVAL
    asked = fake_openai.requests[-1]["body"]["messages"][-1]["content"]
    assert f'<fact step="s1" status="succeeded" trust="trusted" title="long_report s1">\n{SUMMARY}\n</fact>' in asked
    assert '<fact step="s2" status="failed" trust="trusted" title="always_fail s2">\nfailed: upstream unavailable\n</fact>' in asked
    assert "Routine line. Routine line." not in asked


def test_without_an_llm_the_answer_is_the_ledger_itself_citing_every_step(people, no_llm):
    plan = approved_plan(people, [step("s1", "long_report"), step("s2", "noop", {"value": 4})])
    ran(plan, {"s1": "Routine line. " * 100 + "FINDING.", "s2": 4})
    answer = aftermath.compose_answer(plan.pk).answer_text
    assert "[s1] long_report s1 (succeeded): Routine line." in answer and "…" in answer
    assert "[s2] noop s2 (succeeded): 4" in answer
    assert Fact.objects.get(plan=plan, step_key="s1").method == "truncated"
    assert AuditEvent.objects.get(action="plan.answered").data["cites"] == ["s1", "s2"]


def test_a_spent_budget_leaves_a_long_fact_cut_short_and_labelled(people, fake_openai):
    plan = approved_plan(people, [step("s1", "long_report")])
    Plan.objects.filter(pk=plan.pk).update(budget_tokens=100)
    LlmCall.objects.create(plan=plan, purpose="planning", model="fake-model", tokens_in=90, tokens_out=10)
    ran(plan, {"s1": "Routine line. " * 100})
    (fact,) = ledger.ledger_complete(plan.pk)
    assert fact.method == "truncated" and not fake_openai.answered()


def test_ledger_text_is_escaped_on_the_plan_page(people, no_llm, client):
    plan = approved_plan(people, [step("s1", "noop")])
    ran(plan, {"s1": "<script>alert(1)</script> [s1]"})
    aftermath.compose_answer(plan.pk)
    client.force_login(people[0])
    page = client.get(f"/plans/{plan.pk}/").content.decode()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
