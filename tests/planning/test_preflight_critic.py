"""The LLM critic against the fake OpenAI-compatible server: its findings are stored beside the
deterministic ones (capped at medium, unknown steps become plan-level), a failure changes nothing, and
findings about a revision that was edited meanwhile are dropped."""

import json

import pytest

from core import jobs
from planning import critic, services
from planning.models import Goal, LlmCall, Plan
from planning.validation import validate_plan
from tests.conftest import make_user
from tests.fixtures.plans import step


@pytest.fixture
def plan(db):
    alice = make_user("alice", "operator")
    plan = Plan.objects.create(goal=Goal.objects.create(text="Say hello", requester=alice), status=Plan.Status.AWAITING_APPROVAL)
    services.write_revision(
        plan, validate_plan({"steps": [step("pay", "high_effect", {"label": "x"})]}), author=None, planner="human", reason="t"
    )
    return Plan.objects.get(pk=plan.pk)


def reply(fake, findings):
    fake.reply(json.dumps({"findings": findings}))


def test_the_critics_findings_are_stored_capped_and_counted_against_the_plan(fake_openai, plan):
    reply(
        fake_openai,
        [
            {"step": "pay", "severity": "high", "message": "Paying is not needed to say hello.", "fix": "Remove pay."},
            {"step": "s99", "severity": "low", "message": "<b>Larger</b> than the goal needs.", "fix": "Use one step."},
        ],
    )
    assert critic.critique(plan.pk, plan.revision) == 2
    plan.refresh_from_db()
    found = [f for f in plan.preflight if f["check"] == "critic"]
    assert found[0] == {
        "check": "critic",
        "severity": "medium",
        "step": "pay",
        "message": "Paying is not needed to say hello.",
        "fix": "Remove pay.",
    }
    assert found[1]["step"] == "" and found[1]["message"] == "<b>Larger</b> than the goal needs."
    assert {f["check"] for f in plan.preflight} >= {"high_without_verification", "critic"}
    assert LlmCall.objects.filter(plan=plan, purpose="critic").count() == 1
    # Model text is shown escaped, never as markup.
    from django.test import Client

    client = Client()
    client.force_login(make_user("bob", "approver"))
    page = client.get(f"/plans/{plan.pk}/").content.decode()
    assert "&lt;b&gt;Larger&lt;/b&gt;" in page and "<b>Larger</b>" not in page


@pytest.mark.parametrize("failure", ["http_500", "not_json"])
def test_a_critic_failure_leaves_the_findings_as_they_were(fake_openai, plan, failure):
    before = plan.preflight
    if failure == "http_500":
        fake_openai.fail(500)
    else:
        fake_openai.reply("this is not JSON")
    assert critic.critique(plan.pk, plan.revision) == 0
    plan.refresh_from_db()
    assert plan.preflight == before


def test_findings_about_an_edited_revision_are_dropped(fake_openai, plan):
    services.step_update(plan_id=plan.pk, actor=plan.goal.requester, revision=1, key="pay", changes={"success_criteria": "paid"})
    reply(fake_openai, [{"step": "pay", "severity": "low", "message": "Stale.", "fix": "None."}])
    assert critic.critique(plan.pk, 1) == 0
    assert not any(f["check"] == "critic" for f in Plan.objects.get(pk=plan.pk).preflight)


def test_a_new_revision_queues_the_critic_only_when_enabled_and_an_llm_is_configured(fake_openai, plan, settings, monkeypatch):
    queued = []
    monkeypatch.setattr(jobs, "enqueue", lambda name, *args, **options: queued.append((name, *args)))
    services.step_update(plan_id=plan.pk, actor=plan.goal.requester, revision=1, key="pay", changes={"success_criteria": "paid"})
    assert not [q for q in queued if q[0] == "planning.tasks.preflight_critic_task"]
    settings.COUNTERSIGN_PREFLIGHT_CRITIC = True
    services.step_update(plan_id=plan.pk, actor=plan.goal.requester, revision=2, key="pay", changes={"success_criteria": "paid in full"})
    assert ("planning.tasks.preflight_critic_task", plan.pk, 3) in queued
