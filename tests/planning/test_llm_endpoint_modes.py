"""Planning, replanning, code drafting and answers against endpoints that refuse what real ones refuse:
reasoning models (no temperature, no max_tokens), strict-only structured output, JSON mode only, and
plain text. The fake checks strict schemas by OpenAI's rules, independently of the schema builder."""

import json
import logging

import pytest

from core import llm, llm_capabilities
from execution import aftermath
from planning import services
from planning.models import Goal, LlmCall, Plan, Step
from planning.validation import PlanDraft, plan_json_schema
from tests.fakes.openai_server import strict_schema_problems
from tests.fixtures.code_plans import model_answer
from tests.fixtures.plans import approved_plan, step

GOAL = "Count open tickets and compare them with the SLA"
PLAN = {
    "steps": [
        {"key": "s1", "title": "Count open tickets", "tool": "count_open_tickets", "args": {"queue": "support"}, "depends_on": []},
        {"key": "s2", "title": "Get the SLA", "tool": "get_sla_threshold", "args": {"queue": None}, "depends_on": []},
    ]
}
# What each mode makes the planner fall back to, and how many refusals it takes to get there.
MODES = {
    "reasoning": ("json_schema_strict", 1),
    "strict": ("json_schema_strict", 0),
    "json_object": ("json_object", 1),
    "text": ("text", 2),
}


@pytest.fixture(autouse=True)
def fresh_capabilities():
    # What an endpoint refused is remembered for the process; each test starts from the table.
    llm_capabilities.forget_learned()
    yield
    llm_capabilities.forget_learned()


@pytest.fixture
def people(db):
    from tests.conftest import make_user

    return make_user("alice", "operator"), make_user("bob", "approver")


def planned(alice, text=GOAL, mode=Goal.Mode.STEPS) -> Plan:
    plan = services.plan_generate(plan_id=services.goal_submit(requester=alice, text=text, mode=mode).pk)
    assert plan.status == Plan.Status.AWAITING_APPROVAL, plan.failure_reason
    return plan


@pytest.mark.parametrize("mode", MODES)
def test_planning_works_against_each_kind_of_endpoint_and_the_plan_says_how_it_came_back(mode, fake_openai, people, client):
    fake_openai.behave(mode)
    answer = json.dumps(PLAN)
    fake_openai.reply(f"Here is the plan:\n```json\n{answer}\n```" if mode == "text" else answer)
    plan = planned(people[0])
    expected_mode, refusals = MODES[mode]
    assert [s.key for s in plan.steps.all()] == ["s1", "s2"] and plan.steps.get(key="s2").args == {}
    assert len(fake_openai.refusals()) == refusals and len(fake_openai.answered()) == 1
    client.force_login(people[0])
    assert client.get(f"/api/plans/{plan.pk}").json()["output_mode"] == expected_mode


def test_a_reasoning_model_gets_no_temperature_and_max_completion_tokens(fake_openai, people):
    fake_openai.behave("reasoning")
    plan = approved_plan(people, [step("s1", "noop")])
    Plan.objects.filter(pk=plan.pk).update(status=Plan.Status.SUCCEEDED)
    Step.objects.filter(plan=plan).update(status=Step.Status.SUCCEEDED, output=1)
    fake_openai.reply("All done: the value is 1.")
    assert aftermath.compose_answer(plan.pk).answer_text == "All done: the value is 1."
    sent = fake_openai.answered()[0]["body"]
    assert "temperature" not in sent and "max_tokens" not in sent and sent["max_completion_tokens"] >= 300
    assert [r["refused"]["param"] for r in fake_openai.refusals()] == ["temperature", "max_tokens"]


@pytest.mark.parametrize("mode", MODES)
def test_replanning_works_against_each_kind_of_endpoint(mode, fake_openai, people):
    fake_openai.behave(mode)
    plan = approved_plan(people, [step("s1", "noop"), step("s2", "always_fail", depends_on=["s1"])])
    Plan.objects.filter(pk=plan.pk).update(status=Plan.Status.FAILED)
    Step.objects.filter(plan=plan, key="s1").update(status=Step.Status.SUCCEEDED, output=1)
    Step.objects.filter(plan=plan, key="s2").update(status=Step.Status.FAILED, error="upstream unavailable")
    fake_openai.reply(
        json.dumps({"steps": [{"key": "s3", "title": "Try another way", "tool": "noop", "args": {"value": 2}, "depends_on": ["s1"]}]})
    )
    replanned = aftermath.replan(plan.pk)
    assert replanned.status == Plan.Status.AWAITING_APPROVAL and replanned.planner_source.startswith("replan by")
    assert [s.key for s in replanned.steps.all()] == ["s1", "s3"] and replanned.output_mode == MODES[mode][0]
    assert LlmCall.objects.get(plan=plan).purpose == "replan"


@pytest.mark.parametrize("mode", MODES)
def test_code_drafting_works_against_each_kind_of_endpoint(mode, fake_openai, people, demo_data):
    fake_openai.behave(mode)
    fake_openai.reply(model_answer())
    plan = planned(people[0], "Return 2 Aviator sunglasses", Goal.Mode.CODE)
    assert plan.steps.get().tool == "python_sandbox" and LlmCall.objects.get(plan=plan).purpose == "code"


@pytest.mark.parametrize("mode", MODES)
def test_answers_work_against_each_kind_of_endpoint(mode, fake_openai, people):
    fake_openai.behave(mode)
    plan = approved_plan(people, [step("s1", "noop")])
    Plan.objects.filter(pk=plan.pk).update(status=Plan.Status.SUCCEEDED)
    Step.objects.filter(plan=plan).update(status=Step.Status.SUCCEEDED, output=1)
    fake_openai.reply("The value is 1.")
    assert aftermath.compose_answer(plan.pk).answer_text == "The value is 1."
    assert LlmCall.objects.get(plan=plan).purpose == "answer"


def test_a_refused_parameter_is_remembered_and_logged_once(fake_openai, people, caplog):
    fake_openai.behave("json_object")
    fake_openai.reply(json.dumps(PLAN))
    fake_openai.reply(json.dumps(PLAN))
    with caplog.at_level(logging.WARNING, logger="core.llm"):
        planned(people[0])
        planned(people[0])
    assert len(fake_openai.refusals()) == 1
    assert [r["body"]["response_format"]["type"] for r in fake_openai.answered()] == ["json_object", "json_object"]
    assert len([m for m in caplog.messages if "refused response_format json_schema" in m]) == 1
    # Without the endpoint's enforcement, the schema travels in the prompt.
    assert "It must follow this JSON schema" in fake_openai.answered()[0]["body"]["messages"][0]["content"]


def test_the_model_family_table_avoids_the_refusal_altogether(fake_openai, people, settings):
    settings.COUNTERSIGN_PLANNER_MODEL = "o3-mini"
    fake_openai.behave("reasoning")
    plan = approved_plan(people, [step("s1", "noop")])
    Plan.objects.filter(pk=plan.pk).update(status=Plan.Status.SUCCEEDED)
    fake_openai.reply("Done.")
    aftermath.compose_answer(plan.pk)
    assert fake_openai.refusals() == [] and "max_completion_tokens" in fake_openai.answered()[0]["body"]


@pytest.mark.parametrize("override", ["json_object, no-temperature", '{"structured": "json_object", "temperature": false}'])
def test_the_capabilities_can_be_set_for_the_endpoint(override, fake_openai, people, settings):
    settings.COUNTERSIGN_LLM_CAPABILITIES = override
    fake_openai.behave("json_object")
    fake_openai.reply(json.dumps(PLAN))
    planned(people[0])
    sent = fake_openai.requests[0]["body"]
    assert fake_openai.refusals() == [] and sent["response_format"] == {"type": "json_object"} and "temperature" not in sent


def test_a_capabilities_setting_that_cannot_be_read_is_a_clear_failure(fake_openai, settings):
    settings.COUNTERSIGN_LLM_CAPABILITIES = "json_object, telepathy"
    with pytest.raises(llm.LLMError, match="unknown word 'telepathy'"):
        llm.chat([{"role": "user", "content": "hi"}])
    assert fake_openai.requests == []


def test_an_http_error_says_its_status_and_the_endpoints_message_once(fake_openai):
    fake_openai.fail(500, "the model is overloaded")
    with pytest.raises(llm.LLMError) as error:
        llm.chat([{"role": "user", "content": "hi"}])
    assert str(error.value) == "The LLM answered HTTP 500: the model is overloaded"


def test_a_bad_request_about_something_else_is_not_retried(fake_openai):
    fake_openai.fail(400, "This model's maximum context length is 8192 tokens.")
    with pytest.raises(llm.LLMError, match="HTTP 400: This model's maximum context length"):
        llm.chat([{"role": "user", "content": "hi"}], max_tokens=10)
    assert len(fake_openai.requests) == 1


# ---- the strict schema --------------------------------------------------------------------------------


def test_the_fake_refuses_a_schema_strict_mode_would_refuse():
    problems = strict_schema_problems(PlanDraft.model_json_schema())
    assert any("additionalProperties" in p for p in problems) and any("'default' is not permitted" in p for p in problems)


def test_the_plan_schema_is_strict_and_types_each_tools_arguments():
    schema = plan_json_schema()
    assert strict_schema_problems(schema) == []
    branches = {branch["properties"]["tool"].get("const"): branch for branch in schema["$defs"]["StepDraft"]["anyOf"]}
    purchase = branches["purchase_item"]["properties"]["args"]
    assert purchase["required"] == ["item", "quantity", "customer_name"] and purchase["additionalProperties"] is False
    quantity, template = purchase["properties"]["quantity"]["anyOf"]
    assert quantity["type"] == "integer" and template["type"] == "string"  # a whole template stands for a run-time value
    assert purchase["properties"]["customer_name"]["type"] == ["string", "null"]  # optional: nullable
    severity = branches["notify_on_call"]["properties"]["args"]["properties"]["severity"]
    assert {"enum": ["info", "warning", "critical"], "title": "Severity", "type": "string"} in severity["anyOf"]


def test_a_large_catalogue_sends_arguments_as_json_text_and_they_are_still_validated(fake_openai, people, settings):
    settings.COUNTERSIGN_STRICT_SCHEMA_MAX_TOOLS = 2
    fake_openai.behave("strict")
    as_text = {"steps": [{**PLAN["steps"][0], "args": json.dumps({"queue": "support"})}]}
    wrong = {"steps": [{**PLAN["steps"][0], "args": json.dumps({"queue": "support", "sudo": True})}]}
    fake_openai.reply(json.dumps(wrong))
    fake_openai.reply(json.dumps(as_text))
    plan = planned(people[0])
    sent = fake_openai.requests[0]["body"]["response_format"]["json_schema"]["schema"]
    assert sent["$defs"]["StepDraft"]["properties"]["args"]["type"] == "string"
    assert "sudo" in fake_openai.requests[1]["body"]["messages"][-1]["content"]
    assert plan.steps.get().args == {"queue": "support"}
