"""Control characters other than tab and line breaks are refused with a 422 in every text field, through the
API and the pages alike, before anything reaches the database (PostgreSQL cannot store NUL at all)."""

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import ApiToken, Approval, AuditEvent
from execution import engine
from planning import services
from planning.models import Goal, Plan, Step
from tests.fixtures.plans import approved_plan, step

JSON = {"content_type": "application/json"}
HTMX = {"HX-Request": "true"}


def auth(user):
    return {"Authorization": f"Bearer {ApiToken.issue(user=user)}"}


@pytest.fixture
def plan(alice, demo_data, no_llm):
    return services.plan_generate(plan_id=services.goal_submit(requester=alice, text="Return 2 Aviator sunglasses").pk)


@pytest.mark.parametrize("character", ["\x00", "\x1b", "\x7f", "\x85"])
def test_a_goal_with_a_control_character_is_refused_with_422(alice, character):
    response = Client().post("/api/goals", {"text": f"Refund{character} order 7"}, headers=auth(alice), **JSON)
    assert response.status_code == 422
    assert f"U+{ord(character):04X}" in response.json()["detail"] and "goal" in response.json()["detail"]
    assert not Goal.objects.exists()


@pytest.mark.parametrize(
    "changes,field",
    [
        ({"title": "Look up\x00"}, "title"),
        ({"description": "bell\x07"}, "description"),
        ({"success_criteria": "done\x1b[31m"}, "success_criteria"),
        ({"condition": "1 > 0\x00"}, "condition"),
        ({"args": {"keywords": ["avi\x00ator"]}}, "args.keywords.0"),
        ({"args": {"keywords": ["aviator"], "note\x00": "x"}}, "args.'note\\x00'"),
    ],
)
def test_a_step_edit_with_a_control_character_is_refused_with_422_naming_the_field(client, alice, plan, changes, field):
    response = client.patch(f"/api/plans/{plan.pk}/steps/s1", {"revision": 1, **changes}, headers=auth(alice), **JSON)
    assert response.status_code == 422, response.json()
    issue = response.json()["issues"][0]
    assert issue["step"] == "s1" and issue["field"] == field and "control character" in issue["message"]
    assert Plan.objects.get(pk=plan.pk).revision == 1


def test_tab_and_line_breaks_are_kept(client, alice, plan):
    description = "First line\r\nsecond\tline\n"
    response = client.patch(f"/api/plans/{plan.pk}/steps/s1", {"revision": 1, "description": description}, headers=auth(alice), **JSON)
    assert response.status_code == 200
    assert Step.objects.get(plan=plan, key="s1").description == description


def test_the_step_form_shows_the_refusal_on_the_field(alice_client, plan):
    step_row = plan.steps.get(key="s1")
    response = alice_client.post(
        reverse("step_edit", args=[plan.pk, "s1"]),
        {
            "step-s1-revision": 1,
            "step-s1-title": "Look up\x1b the item",
            "step-s1-tool": step_row.tool,
            "step-s1-args": '{"keywords": ["aviator"]}',
        },
        headers=HTMX,
    )
    assert response.status_code == 422 and "U+001B" in response.content.decode()
    assert Plan.objects.get(pk=plan.pk).revision == 1


def test_a_planner_draft_with_a_control_character_is_invalid():
    from planning.validation import PlanInvalid, validate_plan

    with pytest.raises(PlanInvalid) as refused:
        validate_plan({"steps": [step("s1", "noop") | {"title": "noop\x00"}]})
    assert [(issue.step_key, issue.field) for issue in refused.value.issues] == [("s1", "title")]


def test_an_approval_comment_with_a_control_character_is_refused(bob, plan):
    body = {"revision": 1, "content_hash": plan.content_hash, "comment": "fine\x00"}
    response = Client().post(f"/api/plans/{plan.pk}/approve", body, headers=auth(bob), **JSON)
    assert response.status_code == 422 and "comment" in response.json()["detail"]
    assert not Approval.objects.filter(plan=plan).exists() and Plan.objects.get(pk=plan.pk).status == Plan.Status.AWAITING_APPROVAL


def test_a_gate_comment_with_a_control_character_is_refused(alice, bob):
    gated = approved_plan((alice, bob), [step("g", "high_effect", {"label": "pay"})])
    engine.plan_run(plan_id=gated.pk, actor=alice)
    gate_hash = Step.objects.get(plan=gated, key="g").gate_hash
    body = {"approve": True, "gate_hash": gate_hash, "comment": "ok\x00"}
    response = Client().post(f"/api/plans/{gated.pk}/steps/g/decision", body, headers=auth(bob), **JSON)
    assert response.status_code == 422 and "comment" in response.json()["detail"]
    assert Step.objects.get(plan=gated, key="g").status == Step.Status.WAITING_APPROVAL
    assert not AuditEvent.objects.filter(action="gate.approved").exists()
