"""Alternative plans for one goal: drafted by the LLM (through the fake OpenAI server), near-duplicates
dropped, scored, compared, and one chosen; the rest superseded and kept for history."""

import json

import pytest

from approvals.models import AuditEvent
from planning import services
from planning.models import Plan

GOAL = "Check the open ticket count against the SLA and tell the on-call engineer if it is breached"


def step(key, tool, title, args=None, depends_on=(), condition=""):
    return {"key": key, "title": title, "tool": tool, "args": args or {}, "depends_on": list(depends_on), "condition": condition}


NOTIFY_ARGS = {"message": "{{ steps.s1.output }} tickets are open", "severity": "warning"}
COMPARE_THEN_NOTIFY = {
    "steps": [
        step("s1", "count_open_tickets", "Count open tickets", {"queue": "support"}),
        step("s2", "get_sla_threshold", "Read the SLA", {"queue": "support"}),
        step("s3", "notify_on_call", "Page on-call", NOTIFY_ARGS, ["s1", "s2"], "steps.s1.output > steps.s2.output"),
    ]
}
# Same tools, arguments and dependencies, other words: the same strategy.
REWORDED = {
    "steps": [
        step("s1", "count_open_tickets", "How many tickets are open?", {"queue": "billing"}),
        step("s2", "get_sla_threshold", "What is the threshold?", {"queue": "billing"}),
        step(
            "s3",
            "notify_on_call",
            "Tell on-call",
            {**NOTIFY_ARGS, "severity": "critical"},
            ["s1", "s2"],
            "steps.s1.output > steps.s2.output",
        ),
    ]
}
# Another strategy: report the count without paging anyone.
REPORT_ONLY = {"steps": [step("s1", "count_open_tickets", "Count open tickets", {"queue": "support"})]}


def drafted(client, fake_openai, count=3, answers=(COMPARE_THEN_NOTIFY, REWORDED, REPORT_ONLY)):
    for answer in answers:
        fake_openai.reply(json.dumps(answer))
    response = client.post("/api/goals", {"text": GOAL, "alternatives": count, "planner": "llm"}, content_type="application/json")
    assert response.status_code == 201, response.content
    created = response.json()
    # What the planning task runs on the worker.
    services.plan_generate(plan_id=created["plan_id"])
    return created["goal_id"], client.get(f"/api/goals/{created['goal_id']}").json()


def test_three_alternatives_are_drafted_and_the_reworded_duplicate_is_dropped(alice_client, fake_openai):
    goal_id, goal = drafted(alice_client, fake_openai)
    alternatives = goal["alternatives"]
    assert len(alternatives) == 2 and {a["status"] for a in alternatives} == {"alternative"}
    assert alternatives[0]["score"] > alternatives[1]["score"], "the plan that pages nobody scores higher"
    assert "1 step" in alternatives[0]["reason"] and "1 high-risk" in alternatives[1]["reason"]
    proposed = AuditEvent.objects.get(action="plan.alternatives_proposed")
    assert len(proposed.data["dropped"]) == 1 and "same tools and arguments" in proposed.data["dropped"][0]
    assert {a["plan_id"] for a in proposed.data["alternatives"]} == {a["plan_id"] for a in alternatives}
    later = fake_openai.requests[1]["body"]["messages"][-1]["content"]
    assert "different strategy" in later and "count_open_tickets" in later, "later drafts are shown the earlier ones"


def test_an_unchosen_alternative_cannot_be_approved_run_or_edited(alice_client, bob_client, fake_openai):
    _, goal = drafted(alice_client, fake_openai)
    plan = Plan.objects.get(pk=goal["alternatives"][0]["plan_id"])
    decision = {"revision": plan.revision, "content_hash": plan.content_hash}
    assert bob_client.post(f"/api/plans/{plan.pk}/approve", decision, content_type="application/json").status_code == 409
    assert alice_client.post(f"/api/plans/{plan.pk}/run").status_code == 409
    edit = alice_client.patch(f"/api/plans/{plan.pk}/steps/s1", {"revision": plan.revision, "title": "x"}, content_type="application/json")
    assert edit.status_code in {403, 409}
    assert Plan.objects.get(pk=plan.pk).status == Plan.Status.ALTERNATIVE


def test_choosing_an_alternative_makes_it_the_plan_and_supersedes_the_others(alice_client, bob_client, fake_openai):
    goal_id, goal = drafted(alice_client, fake_openai)
    chosen, other = goal["alternatives"][1]["plan_id"], goal["alternatives"][0]["plan_id"]
    response = alice_client.post(f"/api/goals/{goal_id}/choose", {"plan_id": chosen}, content_type="application/json")
    assert response.status_code == 200, response.content
    statuses = {a["plan_id"]: (a["status"], a["reason"]) for a in response.json()["alternatives"]}
    assert statuses[chosen][0] == "awaiting_approval"
    assert statuses[other][0] == "superseded" and "1 step" in statuses[other][1] and f"plan {chosen} chosen" in statuses[other][1]
    event = AuditEvent.objects.get(action="plan.alternative_chosen")
    assert (event.plan_id, event.actor_name, event.data["superseded"][0]["plan_id"]) == (chosen, "alice", other)
    assert AuditEvent.objects.filter(action="plan.superseded", plan_id=other, actor_name="alice").exists()
    plan = Plan.objects.get(pk=chosen)
    approved = bob_client.post(
        f"/api/plans/{chosen}/approve", {"revision": plan.revision, "content_hash": plan.content_hash}, content_type="application/json"
    )
    assert approved.status_code == 200 and approved.json()["status"] == "approved"
    again = alice_client.post(f"/api/goals/{goal_id}/choose", {"plan_id": other}, content_type="application/json")
    assert again.status_code == 409 and "not an alternative" in again.json()["detail"]


def test_choosing_is_refused_to_an_approver_and_for_a_plan_of_another_goal(alice_client, bob_client, fake_openai):
    goal_id, goal = drafted(alice_client, fake_openai)
    plan_id = goal["alternatives"][0]["plan_id"]
    assert bob_client.post(f"/api/goals/{goal_id}/choose", {"plan_id": plan_id}, content_type="application/json").status_code == 403
    stranger = services.goal_submit(requester=Plan.objects.get(pk=plan_id).goal.requester, text="another goal")
    wrong = alice_client.post(f"/api/goals/{stranger.goal_id}/choose", {"plan_id": plan_id}, content_type="application/json")
    assert wrong.status_code == 404
    forged = alice_client.post(f"/api/goals/{goal_id}/choose", {"plan_id": "s1"}, content_type="application/json")
    assert forged.status_code == 422
    assert not AuditEvent.objects.filter(action="plan.alternative_chosen").exists()
    assert {p.status for p in Plan.objects.filter(goal_id=goal_id)} == {Plan.Status.ALTERNATIVE}


@pytest.mark.parametrize("body", [{"alternatives": 5}, {"alternatives": 0}, {"alternatives": 2, "mode": "code"}])
def test_an_impossible_number_of_alternatives_is_refused(alice_client, fake_openai, body):
    response = alice_client.post("/api/goals", {"text": GOAL, **body}, content_type="application/json")
    assert response.status_code == 422 and not Plan.objects.exists()


def test_without_an_llm_the_best_matching_playbooks_are_the_alternatives(alice_client, demo_data, no_llm):
    response = alice_client.post(
        "/api/goals", {"text": "Purchase 2 Aviator sunglasses for customer Dana", "alternatives": 3}, content_type="application/json"
    )
    services.plan_generate(plan_id=response.json()["plan_id"])
    goal = alice_client.get(f"/api/goals/{response.json()['goal_id']}").json()
    plans = [Plan.objects.get(pk=a["plan_id"]) for a in goal["alternatives"]]
    assert len(plans) >= 2 and all(p.planner_source.startswith("Playbook:") for p in plans)
    assert len({p.planner_source for p in plans}) == len(plans)
    assert all(p.status == Plan.Status.ALTERNATIVE for p in plans)


def test_the_plan_page_shows_the_alternatives_side_by_side_with_choose_buttons_for_operators_only(alice_client, bob_client, fake_openai):
    goal_id, goal = drafted(alice_client, fake_openai)
    plan_id = goal["alternatives"][0]["plan_id"]
    page = alice_client.get(f"/plans/{plan_id}/").content.decode()
    assert page.count('class="alternative status-alternative') == 2 and page.count(">Choose plan ") == 2
    assert "notify_on_call" in page and "no preflight findings" in page.lower()
    approver_page = bob_client.get(f"/plans/{plan_id}/").content.decode()
    assert 'id="alternatives"' in approver_page and ">Choose plan " not in approver_page
    assert bob_client.post(f"/goals/{goal_id}/choose/", {"plan_id": plan_id}).status_code == 403
    chosen = alice_client.post(f"/goals/{goal_id}/choose/", {"plan_id": plan_id})
    assert chosen.status_code == 302 and chosen["Location"] == f"/plans/{plan_id}/"
    assert Plan.objects.get(pk=plan_id).status == Plan.Status.AWAITING_APPROVAL


def test_draft_alternatives_on_a_plan_compares_it_with_new_drafts(alice_client, fake_openai):
    fake_openai.reply(json.dumps(COMPARE_THEN_NOTIFY))
    created = alice_client.post("/api/goals", {"text": GOAL, "planner": "llm"}, content_type="application/json").json()
    services.plan_generate(plan_id=created["plan_id"])
    response = alice_client.post(f"/plans/{created['plan_id']}/alternatives/", {"count": "2"})
    drafting = Plan.objects.exclude(pk=created["plan_id"]).get()
    assert response.status_code == 302 and response["Location"] == f"/plans/{drafting.pk}/"
    assert Plan.objects.get(pk=created["plan_id"]).status == Plan.Status.ALTERNATIVE
    fake_openai.reply(json.dumps(REPORT_ONLY))
    fake_openai.reply(json.dumps(REWORDED))
    services.plan_generate(plan_id=drafting.pk)
    goal = alice_client.get(f"/api/goals/{created['goal_id']}").json()
    assert len(goal["alternatives"]) == 2 and {a["status"] for a in goal["alternatives"]} == {"alternative"}
    assert "same tools and arguments" in AuditEvent.objects.get(action="plan.alternatives_proposed").data["dropped"][0], (
        "a draft like the plan already on the table is dropped too"
    )
    assert (
        "Count open tickets" in fake_openai.requests[1]["body"]["messages"][-1]["content"]
        or "count_open_tickets" in (fake_openai.requests[1]["body"]["messages"][-1]["content"])
    )
    assert alice_client.post(f"/plans/{drafting.pk}/alternatives/", {"count": "9"}).status_code == 302
    assert Plan.objects.count() == 2, "an impossible count drafts nothing"


def test_the_api_drafts_alternatives_to_an_existing_plan(alice_client, bob_client, fake_openai):
    fake_openai.reply(json.dumps(COMPARE_THEN_NOTIFY))
    created = alice_client.post("/api/goals", {"text": GOAL, "planner": "llm"}, content_type="application/json").json()
    services.plan_generate(plan_id=created["plan_id"])
    url = f"/api/plans/{created['plan_id']}/alternatives"
    assert bob_client.post(url, {"count": 2}, content_type="application/json").status_code == 403
    assert alice_client.post(url, {"count": 7}, content_type="application/json").status_code == 422
    response = alice_client.post(url, {"count": 2}, content_type="application/json")
    assert response.status_code == 202 and response.json()["status"] == "planning"
    assert alice_client.post(url, {"count": 2}, content_type="application/json").status_code == 409, "one drafting at a time"
    fake_openai.reply(json.dumps(REPORT_ONLY))
    fake_openai.reply(json.dumps(REWORDED))
    services.plan_generate(plan_id=response.json()["plan_id"])
    alternatives = alice_client.get(f"/api/goals/{created['goal_id']}").json()["alternatives"]
    assert {a["plan_id"] for a in alternatives} == {created["plan_id"], response.json()["plan_id"]}


# ---- what must fail (from an attacker's review of alternatives) -----------------------------------------


def test_a_rejected_plan_cannot_return_to_review_unchanged_through_alternatives(alice_client, bob_client, fake_openai):
    fake_openai.reply(json.dumps(COMPARE_THEN_NOTIFY))
    created = alice_client.post("/api/goals", {"text": GOAL, "planner": "llm"}, content_type="application/json").json()
    plan = services.plan_generate(plan_id=created["plan_id"])
    decision = {"revision": plan.revision, "content_hash": plan.content_hash, "comment": "no paging"}
    assert bob_client.post(f"/api/plans/{plan.pk}/reject", decision, content_type="application/json").status_code == 200
    refused = alice_client.post(f"/api/plans/{plan.pk}/alternatives", {"count": 2}, content_type="application/json")
    assert refused.status_code == 409 and Plan.objects.get(pk=plan.pk).status == Plan.Status.REJECTED
    assert Plan.objects.count() == 1


def test_drafts_that_all_repeat_the_plan_on_the_table_end_in_a_clear_planning_failure(alice_client, fake_openai):
    fake_openai.reply(json.dumps(COMPARE_THEN_NOTIFY))
    created = alice_client.post("/api/goals", {"text": GOAL, "planner": "llm"}, content_type="application/json").json()
    services.plan_generate(plan_id=created["plan_id"])
    drafting = alice_client.post(f"/api/plans/{created['plan_id']}/alternatives", {"count": 2}, content_type="application/json").json()
    fake_openai.reply(json.dumps(REWORDED))
    fake_openai.reply(json.dumps(REWORDED))
    services.plan_generate(plan_id=drafting["plan_id"])
    failed = Plan.objects.get(pk=drafting["plan_id"])
    assert failed.status == Plan.Status.PLANNING_FAILED and "No draft differed" in failed.failure_reason
    # The goal is not blocked: the plan on the table can still be chosen.
    chosen = alice_client.post(f"/api/goals/{created['goal_id']}/choose", {"plan_id": created["plan_id"]}, content_type="application/json")
    assert chosen.status_code == 200


def test_every_alternative_keeps_the_budget_the_goal_was_given(alice_client, fake_openai):
    for answer in (COMPARE_THEN_NOTIFY, REPORT_ONLY):
        fake_openai.reply(json.dumps(answer))
    body = {"text": GOAL, "alternatives": 2, "planner": "llm", "budget_tokens": 50_000}
    created = alice_client.post("/api/goals", body, content_type="application/json").json()
    services.plan_generate(plan_id=created["plan_id"])
    plans = Plan.objects.filter(goal_id=created["goal_id"])
    assert plans.count() == 2 and {plan.budget_tokens for plan in plans} == {50_000}


def test_the_goal_text_cannot_change_under_alternatives_already_drafted(alice_client, fake_openai):
    _, goal = drafted(alice_client, fake_openai)
    sibling = Plan.objects.get(pk=goal["alternatives"][0]["plan_id"])
    failed = Plan.objects.create(goal=sibling.goal, status=Plan.Status.PLANNING_FAILED, failure_reason="timeout")
    from core.errors import ServiceError

    with pytest.raises(ServiceError, match="drafted for its current text"):
        services.plan_retry_with_goal(plan=failed, actor=failed.goal.requester, text="Page on-call right now regardless of the SLA")
    assert Plan.objects.get(pk=sibling.pk).goal.text == GOAL


def test_whoever_chose_an_alternative_may_not_countersign_it(alice_client, fake_openai):
    from django.test import Client

    from tests.conftest import client_for, make_user

    admin = make_user("ada", "operator")
    admin.groups.add(*make_user("bob", "approver").groups.all())
    goal_id, goal = drafted(alice_client, fake_openai)
    plan_id = goal["alternatives"][0]["plan_id"]
    ada = client_for(Client, admin)
    assert ada.post(f"/api/goals/{goal_id}/choose", {"plan_id": plan_id}, content_type="application/json").status_code == 200
    plan = Plan.objects.get(pk=plan_id)
    decision = {"revision": plan.revision, "content_hash": plan.content_hash}
    refused = ada.post(f"/api/plans/{plan.pk}/approve", decision, content_type="application/json")
    assert refused.status_code == 403 and Plan.objects.get(pk=plan_id).status == Plan.Status.AWAITING_APPROVAL


def test_alternatives_are_refused_for_a_plan_whose_steps_already_ran(alice_client, fake_openai):
    fake_openai.reply(json.dumps(COMPARE_THEN_NOTIFY))
    created = alice_client.post("/api/goals", {"text": GOAL, "planner": "llm"}, content_type="application/json").json()
    plan = services.plan_generate(plan_id=created["plan_id"])
    plan.steps.filter(key="s1").update(status="succeeded")
    refused = alice_client.post(f"/api/plans/{plan.pk}/alternatives", {"count": 2}, content_type="application/json")
    assert refused.status_code == 409 and "already ran" in refused.json()["detail"]
