import json

import pytest
from django.core.management import CommandError, call_command

from planning import planner
from planning.demo import ONCALL_GOAL

DEMO_GOALS = [
    ONCALL_GOAL,
    "Do you have any round sunglasses in stock under $100?",
    "Return 2 Aviator sunglasses",
    "Purchase 3 Wayfarer sunglasses for customer Alice",
    "I want to buy 3 pairs of classic sunglasses and 1 pair of aviator sunglasses",
]


@pytest.mark.parametrize("goal", DEMO_GOALS)
def test_each_demo_goal_gets_a_playbook_draft_without_any_llm(demo_data, no_llm, goal, capsys):
    call_command("plan", goal, "--json")
    printed = json.loads(capsys.readouterr().out)
    assert printed["planner"] == "playbook" and printed["source"].startswith("Playbook: ")
    assert printed["steps"] and all({"key", "title", "tool", "args", "depends_on", "condition", "risk"} <= set(s) for s in printed["steps"])


def test_playbook_fills_quantity_item_and_customer_from_the_goal(demo_data, no_llm):
    draft = planner.draft_plan("Purchase 3 Wayfarer sunglasses for customer Alice")
    purchase = draft.steps[1]
    assert purchase["tool"] == "purchase_item" and purchase["risk"] == "high"
    assert purchase["args"]["quantity"] == 3 and purchase["args"]["customer_name"] == "Alice"
    assert purchase["condition"] == "steps.s1.output.quantity_in_stock >= 3"
    assert draft.steps[0]["args"] == {"item": "Wayfarer"}


def test_playbook_adapts_to_a_similar_goal_with_other_values(demo_data, no_llm):
    draft = planner.draft_plan("Please return 5 Moon sunglasses for Maria")
    assert draft.steps[0]["args"] == {"item": "Moon"}
    assert draft.steps[1]["args"]["quantity"] == 5 and draft.steps[1]["args"]["customer_name"] == "Maria"


def test_playbook_fills_both_items_of_a_two_item_purchase(demo_data, no_llm):
    steps = planner.draft_plan("I want to buy 2 pairs of sport sunglasses and 4 pairs of moon sunglasses").steps
    assert [s["args"].get("item") for s in steps[:2]] == ["Sport", "Moon"]
    assert [s["args"]["quantity"] for s in steps[2:]] == [2, 4]


def test_search_playbook_reads_shape_and_price(demo_data, no_llm):
    steps = planner.draft_plan("Any aviator sunglasses below $90?").steps
    assert steps[0]["args"] == {"keywords": ["aviator"], "max_price": 90.0, "in_stock_only": True}


def test_plan_command_prints_each_step_in_text(demo_data, no_llm, capsys):
    call_command("plan", ONCALL_GOAL, "--planner", "playbook")
    out = capsys.readouterr().out
    assert "[s3] Notify the on-call engineer  risk=HIGH" in out
    assert "depends_on: s1, s2" in out and "condition: steps.s1.output > steps.s2.output" in out


def test_plan_command_exits_1_with_the_reason_when_planning_fails(db, no_llm):
    with pytest.raises(CommandError, match="Planning failed: No playbook resembles this goal") as failed:
        call_command("plan", "Write a sonnet about the sea")
    assert failed.value.returncode == 1


def test_plan_command_uses_the_llm_when_configured(demo_data, fake_openai, capsys):
    fake_openai.reply(json.dumps({"steps": [{"key": "s1", "title": "Count", "tool": "count_open_tickets", "args": {}}]}))
    call_command("plan", "How many tickets are open?", "--json")
    assert json.loads(capsys.readouterr().out)["planner"] == "llm"


def test_an_approved_plan_can_be_saved_as_a_playbook_and_then_drafts_goals(demo_data, alice, bob, no_llm):
    from planning import services
    from planning.models import Goal, Plan, Playbook, Step

    goal = Goal.objects.create(text="Escalate billing backlog to on-call", requester=alice)
    plan = Plan.objects.create(goal=goal, status=Plan.Status.APPROVED, revision=1)
    Step.objects.create(
        plan=plan, key="s1", title="Count billing tickets", tool="count_open_tickets", args={"queue": "billing"}, risk="low"
    )
    services.playbook_save_from_plan(plan=plan, actor=bob, name="Billing backlog")
    assert Playbook.objects.get(name="Billing backlog").source == "saved"
    draft = planner.draft_plan("Escalate the billing backlog to on-call")
    assert draft.source.startswith("Playbook: Billing backlog") and draft.steps[0]["args"] == {"queue": "billing"}
