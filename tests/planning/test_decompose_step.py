"""Decomposing a step: the planner (the fake OpenAI server, through the real SDK) drafts a sub-plan
that replaces the step in a new revision, renumbered and rewired, which needs approval like any edit."""

import json

import pytest

from approvals.models import AuditEvent
from planning import services
from planning.models import Goal, Plan, PlanRevision
from planning.review import plan_decision_record
from planning.validation import validate_plan
from tests.conftest import wait_until
from tests.fixtures.plans import step

NOTIFY = {"message": "{{ steps.s1.output }} tickets are open", "severity": "warning"}


def reviewed_plan(alice, bob):
    """An approved three-step plan whose s3 reads s1's output in its arguments and its condition."""
    plan = Plan.objects.create(goal=Goal.objects.create(text="Page on-call when the queue breaches the SLA", requester=alice))
    steps = [
        step("s1", "count_open_tickets", {"queue": "support"}),
        step("s2", "get_sla_threshold", {"queue": "support"}),
        step("s3", "notify_on_call", NOTIFY, ["s1", "s2"], "steps.s1.output > steps.s2.output"),
    ]
    services.write_revision(plan, validate_plan({"steps": steps}), author=None, planner="llm", reason="test")
    plan_decision_record(plan_id=plan.pk, actor=bob, revision=plan.revision, content_hash=plan.content_hash, decision="approved")
    return Plan.objects.get(pk=plan.pk)


def sub_step(key, tool, args, depends_on=()):
    return {"key": key, "title": f"{tool} {key}", "tool": tool, "args": args, "depends_on": list(depends_on), "condition": ""}


# s1 "count open tickets" as two counts whose last one passes the total on.
CHAIN = {
    "steps": [
        sub_step("d1", "count_open_tickets", {"queue": "support"}),
        sub_step("d2", "noop", {"value": "{{ steps.d1.output }}"}, ["d1"]),
    ]
}
# Two independent counts: two last steps, so the reader of s1's output is flagged for a reviewer.
FORK = {"steps": [sub_step("d1", "count_open_tickets", {"queue": "support"}), sub_step("d2", "count_open_tickets", {"queue": "billing"})]}


def decompose(client, plan, key="s1", revision=None):
    body = {"revision": plan.revision if revision is None else revision}
    return client.post(f"/api/plans/{plan.pk}/steps/{key}/decompose", body, content_type="application/json")


def steps_of(plan_id):
    return {s["key"]: s for s in Plan.objects.get(pk=plan_id).revisions.order_by("-number").first().content}


def test_decomposing_replaces_the_step_with_renumbered_sub_steps_and_rewires_its_readers(alice, bob, alice_client, fake_openai):
    plan = reviewed_plan(alice, bob)
    fake_openai.reply(json.dumps(CHAIN))
    response = decompose(alice_client, plan)
    assert response.status_code == 202, response.content
    # What the worker's step_decompose_task runs.
    services.step_decompose_perform(plan_id=plan.pk, key="s1", revision=plan.revision, actor_id=alice.pk)
    steps = steps_of(plan.pk)
    assert list(steps) == ["s4", "s5", "s2", "s3"], "the sub-steps take s1's place under fresh keys"
    assert steps["s5"]["depends_on"] == ["s4"] and steps["s5"]["args"] == {"value": "{{ steps.s4.output }}"}
    assert steps["s3"]["depends_on"] == ["s5", "s2"]
    assert steps["s3"]["args"]["message"] == "{{ steps.s5.output }} tickets are open"
    assert steps["s3"]["condition"] == "steps.s5.output > steps.s2.output"
    assert {s["risk"] for s in steps.values()} == {"low", "high"}, "risks come from the registry"
    plan.refresh_from_db()
    assert plan.status == Plan.Status.AWAITING_APPROVAL and plan.revision == 2, "the approval was voided; it needs one again"
    revision = PlanRevision.objects.get(plan=plan, number=2)
    assert (revision.planner, revision.author_id, revision.reason) == ("decompose", alice.pk, "Decomposed s1 into s4, s5")
    event = AuditEvent.objects.get(action="plan.decomposed")
    assert (event.actor_name, event.step_key, event.data["voided_approvals"]) == ("alice", "s1", 1)
    assert event.data["rewired"] == ["s3 now reads s5 instead of s1"]
    asked = fake_openai.requests[0]["body"]["messages"][-1]["content"]
    assert "count_open_tickets" in asked and '"inputs": []' in asked
    page = alice_client.get(f"/plans/{plan.pk}/revisions/").content.decode()
    assert "s4" in page and "s5" in page


def test_a_reader_of_a_sub_plan_with_several_last_steps_is_flagged(alice, bob, alice_client, fake_openai):
    plan = reviewed_plan(alice, bob)
    fake_openai.reply(json.dumps(FORK))
    assert decompose(alice_client, plan).status_code == 202
    services.step_decompose_perform(plan_id=plan.pk, key="s1", revision=plan.revision, actor_id=alice.pk)
    steps = steps_of(plan.pk)
    assert steps["s3"]["depends_on"] == ["s4", "s5", "s2"]
    event = AuditEvent.objects.get(action="plan.decomposed")
    assert event.data["flagged"] and "s3 read s1's output and now reads s5" in event.data["flagged"][0]
    assert "check:" in PlanRevision.objects.get(plan=plan, number=2).reason


def test_a_stale_forged_or_unauthorised_decompose_request_is_refused_and_changes_nothing(
    alice, bob, alice_client, client, carol, fake_openai
):
    plan = reviewed_plan(alice, bob)
    stale = decompose(alice_client, plan, revision=plan.revision - 1)
    assert stale.status_code == 409 and stale.json()["current_revision"] == plan.revision
    assert decompose(alice_client, plan, key="s9").status_code == 404
    assert (
        alice_client.post(f"/api/plans/{plan.pk}/steps/s1/decompose", {"revision": "x"}, content_type="application/json").status_code == 422
    )
    client.force_login(carol)
    assert decompose(client, plan).status_code == 403
    assert not AuditEvent.objects.filter(action__startswith="plan.decompose").exists()
    assert Plan.objects.get(pk=plan.pk).revision == plan.revision and not fake_openai.requests


def test_a_step_that_already_ran_before_a_replan_is_not_decomposed(alice, bob, alice_client, fake_openai):
    plan = reviewed_plan(alice, bob)
    plan.steps.filter(key="s1").update(status="succeeded", output=12)
    response = decompose(alice_client, plan)
    assert response.status_code == 409 and "already ran" in response.json()["detail"]
    assert not AuditEvent.objects.filter(action="plan.decompose_requested").exists()


def test_decomposing_needs_an_llm(alice, bob, alice_client, no_llm):
    plan = reviewed_plan(alice, bob)
    response = decompose(alice_client, plan)
    assert response.status_code == 422 and "LLM" in response.json()["detail"]


def test_a_sub_plan_that_stays_invalid_leaves_the_plan_as_it_was(alice, bob, alice_client, fake_openai):
    plan = reviewed_plan(alice, bob)
    for _ in range(3):
        fake_openai.reply(json.dumps({"steps": [sub_step("d1", "count_open_tickets", {"queue": "support"}, ["s1"])]}))
    assert decompose(alice_client, plan).status_code == 202
    services.step_decompose_perform(plan_id=plan.pk, key="s1", revision=plan.revision, actor_id=alice.pk)
    assert Plan.objects.get(pk=plan.pk).revision == plan.revision
    failed = AuditEvent.objects.get(action="plan.decompose_failed")
    assert "still invalid" in failed.data["reason"]
    assert "s1" in fake_openai.requests[1]["body"]["messages"][-1]["content"], "the repair round hears what was wrong"


def test_a_plan_edited_while_the_sub_plan_was_drafted_is_not_overwritten(alice, bob, alice_client, fake_openai):
    plan = reviewed_plan(alice, bob)
    assert decompose(alice_client, plan).status_code == 202
    services.step_update(plan_id=plan.pk, actor=alice, revision=plan.revision, key="s2", changes={"title": "Read the SLA"})
    services.step_decompose_perform(plan_id=plan.pk, key="s1", revision=plan.revision, actor_id=alice.pk)
    assert "moved on to revision 2" in AuditEvent.objects.get(action="plan.decompose_failed").data["reason"]
    assert "s1" in steps_of(plan.pk) and not fake_openai.requests


@pytest.mark.django_db(transaction=True)
def test_the_sub_plan_arrives_from_the_worker_like_a_replan(alice, bob, alice_client, fake_openai, celery_worker):
    plan = reviewed_plan(alice, bob)
    fake_openai.reply(json.dumps(CHAIN))
    assert decompose(alice_client, plan).status_code == 202
    wait_until(lambda: Plan.objects.get(pk=plan.pk).revision == plan.revision + 1, message="the decomposed revision")
    assert list(steps_of(plan.pk)) == ["s4", "s5", "s2", "s3"]
    page = alice_client.get(f"/plans/{plan.pk}/").content.decode()
    assert "Step s1 was decomposed into a sub-plan" in page


def test_the_decompose_button_refuses_a_stale_page_with_a_conflict_message(alice, bob, alice_client, fake_openai):
    plan = reviewed_plan(alice, bob)
    page = alice_client.get(f"/plans/{plan.pk}/").content.decode()
    assert 'aria-label="Decompose step s1"' in page
    response = alice_client.post(f"/plans/{plan.pk}/steps/s1/decompose/", {"revision": plan.revision - 1}, headers={"HX-Request": "true"})
    assert response.status_code == 409 and "revision 1 is current" in response.content.decode()
    accepted = alice_client.post(f"/plans/{plan.pk}/steps/s1/decompose/", {"revision": plan.revision}, headers={"HX-Request": "true"})
    assert accepted.status_code == 200 and "The planner is decomposing s1" in accepted.content.decode()
    assert AuditEvent.objects.filter(action="plan.decompose_requested", actor_name="alice", step_key="s1").count() == 1


def test_the_decomposed_revision_is_shown_as_changes_since_the_proposal(alice, bob, alice_client, bob_client, fake_openai):
    plan = reviewed_plan(alice, bob)
    fake_openai.reply(json.dumps(CHAIN))
    decompose(alice_client, plan)
    services.step_decompose_perform(plan_id=plan.pk, key="s1", revision=plan.revision, actor_id=alice.pk)
    page = bob_client.get(f"/plans/{plan.pk}/").content.decode()
    changes = page[page.index('id="proposal-changes"') :]
    assert "s1" in changes and "s4" in changes and "s5" in changes and "alice" in changes


def test_decomposing_a_guarded_step_keeps_its_guard_beside_a_sub_step_s_own_condition(alice, bob, alice_client, fake_openai):
    plan = reviewed_plan(alice, bob)
    loosened = {
        "steps": [{**sub_step("d1", "notify_on_call", {"message": "page", "severity": "warning"}), "condition": "steps.s1.output >= 0"}]
    }
    fake_openai.reply(json.dumps(loosened))
    assert decompose(alice_client, plan, key="s3").status_code == 202
    services.step_decompose_perform(plan_id=plan.pk, key="s3", revision=plan.revision, actor_id=alice.pk)
    condition = steps_of(plan.pk)["s4"]["condition"]
    assert "steps.s1.output > steps.s2.output" in condition and "steps.s1.output >= 0" in condition and " and " in condition


@pytest.mark.parametrize(
    "answer",
    [
        {"steps": [{"key": ["d1"], "title": "x", "tool": "noop", "args": {}}]},
        {"steps": [sub_step("s2", "noop", {"value": "x"})]},
        {"steps": [sub_step("d1", "noop", {"value": json.loads("[" * 400 + "]" * 400)})]},
    ],
    ids=["a-list-as-key", "a-key-of-the-plan", "arguments-nested-400-deep"],
)
def test_a_hostile_sub_plan_is_refused_with_a_reason_and_changes_nothing(alice, bob, alice_client, fake_openai, settings, answer):
    settings.OPENAI_MAX_RETRIES = 0
    plan = reviewed_plan(alice, bob)
    for _ in range(4):  # the first answer and every repair round
        fake_openai.reply(json.dumps(answer))
    assert decompose(alice_client, plan).status_code == 202
    services.step_decompose_perform(plan_id=plan.pk, key="s1", revision=plan.revision, actor_id=alice.pk)
    after = Plan.objects.get(pk=plan.pk)
    assert after.revision == plan.revision and after.content_hash == plan.content_hash
    assert AuditEvent.objects.filter(action="plan.decompose_failed", plan_id=plan.pk).exists()
