"""Every LLM call of a plan is counted (planning, repairs, llm_generate steps run by the worker, answers),
the plan page, the API and Metrics show the same totals as the endpoint served, and a plan's budget
stops further calls until an approver raises it."""

import json

import pytest
from django.urls import reverse

from approvals.models import AuditEvent
from core import llm
from execution import engine
from planning import services
from planning.models import LlmCall, Plan, Step
from planning.review import plan_decision_record
from tests.conftest import make_user, wait_until

INVALID = {"steps": [{"key": "s1", "title": "Summarise", "tool": "summarise_everything", "args": {}}]}
WITH_LLM_STEP = {"steps": [{"key": "s1", "title": "Summarise", "tool": "llm_generate", "args": {"prompt": "Summarise the day"}}]}


@pytest.fixture
def people(db):
    # Not transactional: the planning task goal_submit queues on commit is never sent, and the test
    # plans in-process.
    return make_user("alice", "operator"), make_user("bob", "approver")


@pytest.fixture
def committed_people(transactional_db):
    # Committed: the Celery worker plans, runs the steps and writes the answer.
    return make_user("alice", "operator"), make_user("bob", "approver")


def planned_by_the_worker(plan: Plan) -> Plan:
    return wait_until(lambda: Plan.objects.filter(pk=plan.pk).exclude(status=Plan.Status.PLANNING).first(), timeout=30, message="the plan")


def approve_and_run(plan: Plan, people) -> None:
    alice, bob = people
    plan_decision_record(plan_id=plan.pk, actor=bob, revision=plan.revision, content_hash=plan.content_hash, decision="approved")
    engine.plan_run(plan_id=plan.pk, actor=alice)


def test_tokens_and_cost_on_the_plan_page_api_and_metrics_equal_what_the_endpoint_served(
    committed_people, celery_worker, fake_openai_server, client
):
    people = committed_people
    fake = fake_openai_server
    fake.reset()
    fake.reply(json.dumps(INVALID), prompt_tokens=100, completion_tokens=10)
    fake.reply(json.dumps(WITH_LLM_STEP), prompt_tokens=200, completion_tokens=20)
    fake.reply("A calm day.", prompt_tokens=300, completion_tokens=30)
    fake.reply("The day was calm.", prompt_tokens=400, completion_tokens=40)
    alice, bob = people
    plan = planned_by_the_worker(services.goal_submit(requester=alice, text="Summarise the day"))
    assert plan.status == Plan.Status.AWAITING_APPROVAL, plan.failure_reason
    approve_and_run(plan, people)
    plan = wait_until(lambda: Plan.objects.filter(pk=plan.pk).exclude(answer_text="").first(), timeout=30, message="the answer")
    assert plan.answer_text == "The day was calm." and plan.steps.get().output == "A calm day."

    served_in, served_out = fake.usage_total()
    assert (served_in, served_out) == (1000, 100)
    cost = sum(llm.cost_usd("gpt-4.1-mini", u["prompt_tokens"], u["completion_tokens"]) for u in fake.served)
    assert sorted(LlmCall.objects.filter(plan=plan).values_list("purpose", flat=True)) == ["answer", "llm_generate", "planning", "repair"]
    assert LlmCall.objects.get(plan=plan, purpose="llm_generate").step_key == "s1"

    client.force_login(alice)
    usage = client.get(f"/api/plans/{plan.pk}").json()["llm_usage"]
    assert usage == {"calls": 4, "tokens_in": served_in, "tokens_out": served_out, "cost_usd": pytest.approx(cost)}
    page = client.get(reverse("plan_detail", args=[plan.pk])).content.decode()
    assert f"4 calls · {served_in} tokens in · {served_out} out · ${cost:.4f}" in page

    client.force_login(make_user("carol", "auditor"))
    metrics = client.get("/metrics/").content.decode()
    assert f'id="m-tokens">{served_in} in · {served_out} out' in metrics and f'id="m-cost">${cost:.4f}' in metrics


def test_planning_over_budget_stops_asking_says_why_and_resumes_after_an_approver_raises_it(people, fake_openai, client):
    alice, bob = people
    client.force_login(alice)
    created = client.post("/api/goals", {"text": "Summarise the day", "budget_tokens": 100}, content_type="application/json")
    assert created.status_code == 201, created.content
    plan_id = created.json()["plan_id"]
    fake_openai.reply(json.dumps(INVALID), prompt_tokens=100, completion_tokens=20)
    plan = services.plan_generate(plan_id=plan_id)

    assert plan.status == Plan.Status.PLANNING_FAILED and len(fake_openai.requests) == 1  # the repair was never asked for
    assert "budget of 100 tokens spent: 120 used in 1 call" in plan.failure_reason
    assert AuditEvent.objects.filter(action="plan.llm_budget_spent", plan_id=plan_id).exists()
    assert AuditEvent.objects.filter(action="plan.planning_failed", plan_id=plan_id, data__reason=plan.failure_reason).exists()

    assert client.post(f"/api/plans/{plan_id}/budget", {"tokens": 1000, "reason": "x"}, content_type="application/json").status_code == 403
    client.force_login(bob)
    raised = client.post(f"/api/plans/{plan_id}/budget", {"tokens": 1000, "reason": "worth it"}, content_type="application/json")
    assert raised.status_code == 200 and raised.json()["budget"]["tokens"] == 1000
    assert AuditEvent.objects.get(action="plan.budget_raised", plan_id=plan_id).data["before"]["tokens"] == 100

    services.plan_retry(plan=plan, actor=alice)
    fake_openai.reply(json.dumps(WITH_LLM_STEP), prompt_tokens=200, completion_tokens=20)
    plan = services.plan_generate(plan_id=plan_id)
    assert plan.status == Plan.Status.AWAITING_APPROVAL and plan.llm_usage()["calls"] == 2


def test_a_budget_can_only_be_raised_and_needs_a_reason(people, fake_openai):
    alice, bob = people
    plan = services.goal_submit_within_budget(requester=alice, text="Summarise the day", budget_usd=0.5)
    assert AuditEvent.objects.get(action="plan.budget_set", plan_id=plan.pk).data["usd"] == 0.5
    with pytest.raises(services.ServiceError, match="can only be raised"):
        services.plan_budget_raise(plan_id=plan.pk, actor=bob, usd=0.1, reason="cheaper")
    with pytest.raises(services.ServiceError, match="Say why"):
        services.plan_budget_raise(plan_id=plan.pk, actor=bob, usd=1, reason=" ")


def test_the_usd_budget_message_reads_as_money(people, fake_openai, settings):
    settings.COUNTERSIGN_PLAN_BUDGET_USD = 0.0001
    settings.COUNTERSIGN_MODEL_PRICES = {"gpt-4.1-mini": [0.4, 1.6]}
    settings.COUNTERSIGN_PLANNER_MODEL = "gpt-4.1-mini"
    fake_openai.reply(json.dumps(INVALID), prompt_tokens=1000, completion_tokens=100)
    plan = services.plan_generate(plan_id=services.goal_submit(requester=people[0], text="Summarise the day").pk)
    assert "LLM budget of $0.0001 spent: $0.00056 used in 1 call" in plan.failure_reason


def test_a_step_over_budget_fails_with_the_reason_and_runs_after_the_budget_is_raised(committed_people, celery_worker, fake_openai_server):
    people = committed_people
    fake = fake_openai_server
    fake.reset()
    alice, bob = people
    fake.reply(json.dumps(WITH_LLM_STEP), prompt_tokens=200, completion_tokens=20)
    plan = planned_by_the_worker(services.goal_submit_within_budget(requester=alice, text="Summarise the day", budget_tokens=200))
    assert plan.status == Plan.Status.AWAITING_APPROVAL, plan.failure_reason
    approve_and_run(plan, people)
    # The step cannot ask, the replan cannot ask; a retry of the remaining steps is proposed instead.
    plan = wait_until(lambda: Plan.objects.filter(pk=plan.pk, status=Plan.Status.AWAITING_APPROVAL).first(), timeout=30, message="replan")
    assert len(fake.requests) == 1
    failed = AuditEvent.objects.filter(action="step.failed", plan_id=plan.pk).first()
    assert failed and "budget of 200 tokens spent: 220 used in 1 call" in failed.data.get("error", "")
    assert "budget of 200 tokens spent" in plan.planner_source

    services.plan_budget_raise(plan_id=plan.pk, actor=bob, tokens=5000, reason="the summary is needed")
    fake.reply("A calm day.", prompt_tokens=300, completion_tokens=30)
    fake.reply("The day was calm.", prompt_tokens=400, completion_tokens=40)
    approve_and_run(plan, people)
    plan = wait_until(lambda: Plan.objects.filter(pk=plan.pk).exclude(answer_text="").first(), timeout=30, message="the answer")
    assert plan.status == Plan.Status.SUCCEEDED and Step.objects.get(plan=plan, key="s1").output == "A calm day."
