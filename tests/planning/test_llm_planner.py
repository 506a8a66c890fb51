"""The LLM planner through the real openai SDK, against the OpenAI-compatible fake server."""

import json

import pytest

from planning import planner

ONCALL_GOAL = "Check Jira ticket count, compare with SLA, and notify on-call engineer if breached"

ONCALL_PLAN = {
    "steps": [
        {"key": "s1", "title": "Count open tickets", "tool": "count_open_tickets", "args": {"queue": "support"}, "depends_on": []},
        {"key": "s2", "title": "Get the SLA threshold", "tool": "get_sla_threshold", "args": {"queue": "support"}, "depends_on": []},
        {
            "key": "s3",
            "title": "Notify the on-call engineer",
            "tool": "notify_on_call",
            "args": {"message": "{{ steps.s1.output }} open tickets exceed the SLA of {{ steps.s2.output }}", "severity": "warning"},
            "depends_on": ["s1", "s2"],
            "condition": "steps.s1.output > steps.s2.output",
        },
    ]
}


def test_the_sdk_sends_model_structured_output_schema_and_tool_catalogue(fake_openai, settings):
    settings.COUNTERSIGN_PLANNER_MODEL = "planner-model-x"
    fake_openai.reply(json.dumps(ONCALL_PLAN))
    planner.draft_with_llm(ONCALL_GOAL)
    sent = fake_openai.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["authorization"] == "Bearer sk-test"
    body = sent["body"]
    assert body["model"] == "planner-model-x"
    schema = body["response_format"]["json_schema"]["schema"]
    assert body["response_format"]["type"] == "json_schema"
    assert "steps" in schema["properties"] and "StepDraft" in schema["$defs"]
    system = body["messages"][0]["content"]
    for name in ["count_open_tickets", "get_sla_threshold", "notify_on_call", "purchase_item"]:
        assert f'"name": "{name}"' in system
    assert '"risk": "high"' in system
    assert body["messages"][-1] == {"role": "user", "content": f"Goal: {ONCALL_GOAL}"}


def test_the_on_call_goal_yields_a_high_notify_step_gated_on_count_and_threshold(fake_openai):
    fake_openai.reply(json.dumps(ONCALL_PLAN), prompt_tokens=900, completion_tokens=150)
    draft = planner.draft_with_llm(ONCALL_GOAL)
    notify = next(s for s in draft.steps if s["tool"] == "notify_on_call")
    assert notify["risk"] == "high"
    assert set(notify["depends_on"]) == {"s1", "s2"}
    assert notify["condition"] == "steps.s1.output > steps.s2.output"
    assert (draft.tokens_in, draft.tokens_out, draft.repairs) == (900, 150, 0)
    assert draft.latency_ms >= 0 and draft.model


def test_an_invalid_answer_is_repaired_with_the_validation_errors(fake_openai):
    broken = {"steps": [{**ONCALL_PLAN["steps"][0], "tool": "count_jira_tickets"}]}
    fake_openai.reply(json.dumps(broken), prompt_tokens=100, completion_tokens=10)
    fake_openai.reply(json.dumps(ONCALL_PLAN), prompt_tokens=200, completion_tokens=20)
    draft = planner.draft_with_llm(ONCALL_GOAL)
    assert draft.repairs == 1 and (draft.tokens_in, draft.tokens_out) == (300, 30)
    repair_request = fake_openai.requests[1]["body"]["messages"]
    assert repair_request[-2]["role"] == "assistant"
    assert "unknown tool 'count_jira_tickets'" in repair_request[-1]["content"]


def test_planning_fails_clearly_after_two_repair_rounds(fake_openai):
    for _ in range(3):
        fake_openai.reply("I cannot make a plan, sorry.")
    with pytest.raises(planner.PlanningFailed, match="still invalid after 2 repair round"):
        planner.draft_with_llm(ONCALL_GOAL)
    assert len(fake_openai.requests) == 3


def test_an_unreachable_or_failing_llm_is_a_clear_failure(fake_openai):
    fake_openai.fail(503, "overloaded")
    with pytest.raises(planner.PlanningFailed, match="HTTP 503"):
        planner.draft_with_llm(ONCALL_GOAL)


def test_a_slow_llm_hits_the_explicit_timeout(fake_openai, settings):
    settings.OPENAI_TIMEOUT_S = 0.3
    fake_openai.hang(2)
    with pytest.raises(planner.PlanningFailed, match="did not answer within"):
        planner.draft_with_llm(ONCALL_GOAL)
