"""A corpus of malformed planner answers. Each ends in a valid plan after repair, or in a clear planning
failure with nothing stored; never a crash, never an invalid plan stored as valid."""

import json

import pytest

from approvals.models import AuditEvent
from planning import services
from planning.models import Goal, Plan

GOOD = {"steps": [{"key": "s1", "title": "Count open tickets", "tool": "count_open_tickets", "args": {"queue": "support"}}]}


def plan_of(*steps):
    return json.dumps({"steps": list(steps)})


def st(key="s1", tool="count_open_tickets", args=None, **extra):
    return {"key": key, "title": f"Step {key}", "tool": tool, "args": {"queue": "support"} if args is None else args, **extra}


MALFORMED = {
    "plain prose": "Sure! First count the tickets, then notify the engineer.",
    "empty answer": "",
    "truncated json": '{"steps": [{"key": "s1", "title": "Count',
    "json array": json.dumps([st()]),
    "steps is a string": json.dumps({"steps": "s1 then s2"}),
    "steps is null": json.dumps({"steps": None}),
    "wrapped in another object": json.dumps({"plan": GOOD}),
    "args is a string": plan_of({**st(), "args": "queue=support"}),
    "depends_on is a string": plan_of(st("s1"), {**st("s2"), "depends_on": "s1"}),
    "key is a number": plan_of({**st(), "key": 1}),
    "title missing": plan_of({k: v for k, v in st().items() if k != "title"}),
    "unknown tool": plan_of(st(tool="rm_rf")),
    "arguments of the wrong type": plan_of(st(tool="purchase_item", args={"item": "Aviator", "quantity": "three"})),
    "unexpected argument": plan_of(st(args={"queue": "support", "sudo": True})),
    "missing required argument": plan_of(st(tool="notify_on_call", args={})),
    "cycle": plan_of(st("s1", depends_on=["s2"]), st("s2", depends_on=["s1"])),
    "dangling dependency": plan_of(st("s1", depends_on=["s9"])),
    "self dependency": plan_of(st("s1", depends_on=["s1"])),
    "duplicate keys": plan_of(st("s1"), st("s1")),
    "template to a non-dependency": plan_of(st("s1"), st("s2", tool="notify_on_call", args={"message": "{{ steps.s1.output }}"})),
    "template outside steps": plan_of(st(tool="notify_on_call", args={"message": "{{ settings.SECRET_KEY }}"})),
    "condition that calls code": plan_of(st("s1"), st("s2", depends_on=["s1"], condition="__import__('os').system('id')")),
    "condition with bad syntax": plan_of(st("s1"), st("s2", depends_on=["s1"], condition="steps.s1.output >>> 2")),
    "500 steps": plan_of(*[st(f"s{i}") for i in range(500)]),
    "empty plan": json.dumps({"steps": []}),
    "huge string": plan_of({**st(), "title": "A" * 300_000}),
    "nested too deeply": "[" * 100_000 + "]" * 100_000,
    "args nested too deeply": plan_of(st(tool="notify_on_call", args={"message": "x", "severity": json.loads("[" * 50 + "]" * 50)})),
    "NaN quantity": '{"steps": [{"key": "s1", "title": "Buy", "tool": "purchase_item", "args": {"item": "Aviator", "quantity": NaN}}]}',
}

ACCEPTED = {
    "fenced json": "```json\n" + json.dumps(GOOD) + "\n```",
    "json with chatter around it": "Here is the plan:\n" + json.dumps(GOOD) + "\nLet me know!",
    "html and script in text": plan_of({**st(), "title": "<script>alert(1)</script>", "description": '<img src=x onerror="alert(2)">'}),
    "a model claiming a HIGH tool is LOW": plan_of({**st(tool="purchase_item", args={"item": "Aviator", "quantity": 1}), "risk": "low"}),
}


@pytest.fixture
def planning_plan(alice):
    goal = Goal.objects.create(text="Check tickets against the SLA", requester=alice)
    return Plan.objects.create(goal=goal, requested_planner="llm")


def test_the_corpus_covers_at_least_25_malformed_answers():
    assert len(MALFORMED) + len(ACCEPTED) >= 25


@pytest.mark.parametrize("answer", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_answer_that_stays_malformed_fails_planning_cleanly(fake_openai, planning_plan, answer):
    for _ in range(3):
        fake_openai.reply(answer)
    plan = services.plan_generate(plan_id=planning_plan.pk)
    assert plan.status == Plan.Status.PLANNING_FAILED
    assert plan.failure_reason.startswith("The LLM's plan was still invalid after 2 repair round(s):")
    assert len(plan.failure_reason) < 3000
    assert plan.steps.count() == 0 and plan.revisions.count() == 0 and plan.content_hash == ""
    assert AuditEvent.objects.filter(action="plan.planning_failed", plan_id=plan.pk).count() == 1


@pytest.mark.parametrize("answer", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_answer_is_repaired_into_a_valid_plan(fake_openai, planning_plan, answer):
    fake_openai.reply(answer)
    fake_openai.reply(json.dumps(GOOD))
    plan = services.plan_generate(plan_id=planning_plan.pk)
    assert plan.status == Plan.Status.AWAITING_APPROVAL
    assert [s.key for s in plan.steps.all()] == ["s1"]
    assert "That plan is invalid" in fake_openai.requests[1]["body"]["messages"][-1]["content"]


@pytest.mark.parametrize("answer", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_a_recoverable_answer_is_accepted_as_is_with_registry_risk(fake_openai, planning_plan, answer):
    fake_openai.reply(answer)
    plan = services.plan_generate(plan_id=planning_plan.pk)
    assert plan.status == Plan.Status.AWAITING_APPROVAL
    step = plan.steps.get()
    assert step.risk == ("high" if step.tool == "purchase_item" else "low")
    assert len(fake_openai.requests) == 1
