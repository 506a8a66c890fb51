"""Every state-changing API route writes its audit event; the metrics page shows known answers."""

from datetime import timedelta

import pytest
from django.test import Client, override_settings
from django.utils import timezone

from approvals import grants
from approvals.models import ApiToken, Approval, AuditEvent
from execution import engine
from planning import review, services
from planning.models import Goal, Plan, PlanRevision, Step
from project.api import api
from tests.conftest import make_user
from tests.fixtures.plans import approved_plan, step
from tests.tools_sources.conftest import DESK, ROOT, add_source

READ_ONLY_POSTS = {("post", "/api/audit/verify"): "checks a head against the chain; changes nothing"}


@pytest.fixture
def people(db):
    return make_user("alice", "operator"), make_user("bob", "approver")


def token(user):
    return {"Authorization": f"Bearer {ApiToken.issue(user=user)}"}


def awaiting(people):
    plan = Plan.objects.create(goal=Goal.objects.create(text="api walk", requester=people[0]), status=Plan.Status.AWAITING_APPROVAL)
    from planning.validation import validate_plan

    services.write_revision(
        plan, validate_plan({"steps": [step("s1", "noop"), step("s2", "noop")]}), author=None, planner="llm", reason="test"
    )
    return Plan.objects.get(pk=plan.pk)


def scenarios(people):
    alice, bob = people
    json_post = {"content_type": "application/json"}

    def goals():
        return Client().post("/api/goals", {"text": "Return 2 Aviator sunglasses"}, headers=token(alice), **json_post), "goal.submitted"

    def add_step():
        plan = awaiting(people)
        return Client().post(
            f"/api/plans/{plan.pk}/steps", {"revision": plan.revision, "title": "x", "tool": "noop"}, headers=token(alice), **json_post
        ), "plan.edited"

    def patch_step():
        plan = awaiting(people)
        return Client().patch(
            f"/api/plans/{plan.pk}/steps/s1", {"revision": plan.revision, "title": "y"}, headers=token(alice), **json_post
        ), "plan.edited"

    def delete_step():
        plan = awaiting(people)
        return Client().delete(f"/api/plans/{plan.pk}/steps/s2?revision={plan.revision}", headers=token(alice)), "plan.edited"

    def approve():
        plan = awaiting(people)
        return Client().post(
            f"/api/plans/{plan.pk}/approve", {"revision": plan.revision, "content_hash": plan.content_hash}, headers=token(bob), **json_post
        ), "plan.approved"

    def reject():
        plan = awaiting(people)
        return Client().post(
            f"/api/plans/{plan.pk}/reject",
            {"revision": plan.revision, "content_hash": plan.content_hash, "comment": "no"},
            headers=token(bob),
            **json_post,
        ), "plan.rejected"

    def request_changes():
        plan = awaiting(people)
        return Client().post(
            f"/api/plans/{plan.pk}/request-changes",
            {"revision": plan.revision, "content_hash": plan.content_hash, "comment": "more"},
            headers=token(bob),
            **json_post,
        ), "plan.changes_requested"

    def resubmit():
        plan = awaiting(people)
        review.plan_decision_record(
            plan_id=plan.pk, actor=bob, revision=plan.revision, content_hash=plan.content_hash, decision="changes_requested", comment="more"
        )
        return Client().post(f"/api/plans/{plan.pk}/resubmit", headers=token(alice)), "plan.resubmitted"

    def run():
        plan = approved_plan(people, [step("s1", "noop")])
        return Client().post(f"/api/plans/{plan.pk}/run", headers=token(alice)), "plan.run_started"

    def cancel():
        plan = approved_plan(people, [step("s1", "noop")])
        return Client().post(f"/api/plans/{plan.pk}/cancel", headers=token(alice)), "plan.cancelled"

    def gate():
        plan = approved_plan(people, [step("g", "high_effect", {"label": "walk"})])
        engine.plan_run(plan_id=plan.pk, actor=alice)
        gate_hash = plan.steps.get(key="g").gate_hash
        return Client().post(
            f"/api/plans/{plan.pk}/steps/g/decision", {"approve": True, "gate_hash": gate_hash}, headers=token(bob), **json_post
        ), "gate.approved"

    def raise_budget():
        plan = awaiting(people)
        return Client().post(
            f"/api/plans/{plan.pk}/budget", {"usd": 2.5, "reason": "a larger goal"}, headers=token(bob), **json_post
        ), "plan.budget_raised"

    root = make_user("root", None)
    root.is_superuser = root.is_staff = True
    root.save()

    def add_tool_source():
        body = {"name": "walkdesk", "stdio": DESK, "cwd": str(ROOT), "trusted": True}
        return Client().post("/api/tool-sources", body, headers=token(root), **json_post), "tool_source.added", "root"

    def sync_tool_source():
        add_source("syncdesk", stdio=DESK, trusted=True)
        return Client().post("/api/tool-sources/syncdesk/sync", headers=token(root)), "tool_source.synced", "root"

    def override_tool():
        add_source("overdesk", stdio=DESK, trusted=True)
        body = {"risk": "high", "reason": "we treat every ticket change as irreversible"}
        return Client().patch("/api/tools/overdesk.read_ticket", body, headers=token(root), **json_post), "tool.overridden", "root"

    def create_grant():
        body = {"tool": "high_effect", "predicate": {"label": {"equals": "not-this-walk"}}, "max_uses": 2}
        return Client().post("/api/grants", body, headers=token(bob), **json_post), "grant.created", "bob"

    def revoke_grant():
        grant = grants.grant_create(actor=bob, tool="noop", predicate={}, max_uses=1)
        return Client().delete(f"/api/grants/{grant.pk}", headers=token(bob)), "grant.revoked", "bob"

    def batch():
        plan = approved_plan(people, [step("g", "high_effect", {"label": "batch walk"})])
        engine.plan_run(plan_id=plan.pk, actor=alice)
        body = [{"plan_id": plan.pk, "step_key": "g", "gate_hash": plan.steps.get(key="g").gate_hash, "approve": True}]
        return Client().post("/api/gates/decisions", body, headers=token(bob), **json_post), "gate.approved"

    def choose():
        goal = Goal.objects.create(text="two drafts", requester=alice)
        first, second = (Plan.objects.create(goal=goal, status=Plan.Status.ALTERNATIVE, alternative_score=s) for s in (80, 60))
        return Client().post(
            f"/api/goals/{goal.pk}/choose", {"plan_id": second.pk}, headers=token(alice), **json_post
        ), "plan.alternative_chosen"

    def decompose():
        plan = awaiting(people)
        # Only the request is audited here; the sub-plan is drafted by the worker (tests/planning).
        with override_settings(OPENAI_BASE_URL="http://127.0.0.1:9/v1", OPENAI_API_KEY="sk-test"):
            response = Client().post(
                f"/api/plans/{plan.pk}/steps/s1/decompose", {"revision": plan.revision}, headers=token(alice), **json_post
            )
        return response, "plan.decompose_requested"

    def draft_alternatives():
        plan = awaiting(people)
        return Client().post(
            f"/api/plans/{plan.pk}/alternatives", {"count": 2}, headers=token(alice), **json_post
        ), "plan.alternatives_requested"

    return {
        ("post", "/api/plans/{plan_id}/alternatives"): draft_alternatives,
        ("post", "/api/goals/{goal_id}/choose"): choose,
        ("post", "/api/plans/{plan_id}/steps/{key}/decompose"): decompose,
        ("post", "/api/gates/decisions"): batch,
        ("post", "/api/grants"): create_grant,
        ("delete", "/api/grants/{grant_id}"): revoke_grant,
        ("post", "/api/tool-sources"): add_tool_source,
        ("post", "/api/tool-sources/{name}/sync"): sync_tool_source,
        ("patch", "/api/tools/{tool_name}"): override_tool,
        ("post", "/api/goals"): goals,
        ("post", "/api/plans/{plan_id}/steps"): add_step,
        ("patch", "/api/plans/{plan_id}/steps/{key}"): patch_step,
        ("delete", "/api/plans/{plan_id}/steps/{key}"): delete_step,
        ("post", "/api/plans/{plan_id}/approve"): approve,
        ("post", "/api/plans/{plan_id}/reject"): reject,
        ("post", "/api/plans/{plan_id}/request-changes"): request_changes,
        ("post", "/api/plans/{plan_id}/resubmit"): resubmit,
        ("post", "/api/plans/{plan_id}/run"): run,
        ("post", "/api/plans/{plan_id}/cancel"): cancel,
        ("post", "/api/plans/{plan_id}/steps/{key}/decision"): gate,
        ("post", "/api/plans/{plan_id}/budget"): raise_budget,
    }


def test_every_state_changing_api_route_writes_its_audit_event(people):
    schema = api.get_openapi_schema()
    changing = {
        (method, path) for path, methods in schema["paths"].items() for method in methods if method in {"post", "put", "patch", "delete"}
    }
    walks = scenarios(people)
    assert changing - set(READ_ONLY_POSTS) == set(walks), "a new state-changing route needs an audit scenario here"
    for route, walk in walks.items():
        before = AuditEvent.objects.count()
        response, action, *named_actor = walk()
        assert response.status_code in {200, 201, 202}, (route, response.status_code, response.content[:300])
        new = list(AuditEvent.objects.filter(seq__gt=before).values_list("action", "actor_name"))
        approver_actions = ("plan.approved", "plan.rejected", "plan.changes", "plan.budget", "gate.")
        actor = named_actor[0] if named_actor else "bob" if action.startswith(approver_actions) else "alice"
        assert (action, actor) in new, (
            route,
            new,
        )


def test_the_metrics_page_shows_the_known_answers_of_its_fixture(client, people, settings):
    alice, bob = people
    settings.COUNTERSIGN_MODEL_PRICES = {"gpt-4.1-mini": [0.4, 1.6]}
    now = timezone.now()
    start = now - timedelta(hours=2)

    def plan(status, *, tokens=(0, 0), ran=None, replans=0, waits=None, edited=False):
        goal = Goal.objects.create(text=f"{status} plan", requester=alice)
        made = Plan.objects.create(
            goal=goal, status=status, tokens_in=tokens[0], tokens_out=tokens[1], model="gpt-4.1-mini", replan_count=replans
        )
        PlanRevision.objects.create(
            plan=made, number=1, content=[{"key": "s1", "title": "a", "tool": "noop", "args": {}}], content_hash="h1", planner="llm"
        )
        PlanRevision.objects.filter(plan=made, number=1).update(created_at=start)
        if edited:
            PlanRevision.objects.create(
                plan=made,
                number=2,
                content=[{"key": "s1", "title": "b", "tool": "noop", "args": {}}],
                content_hash="h2",
                planner="human",
                author=alice,
            )
            PlanRevision.objects.filter(plan=made, number=2).update(created_at=start + timedelta(seconds=10))
        if waits is not None:
            approval = Approval.objects.create(plan=made, decision="approved", approver=bob, revision=2 if edited else 1, content_hash="h")
            Approval.objects.filter(pk=approval.pk).update(created_at=start + timedelta(seconds=waits))
        if ran is not None:
            Plan.objects.filter(pk=made.pk).update(started_at=start, finished_at=start + timedelta(seconds=ran))
        return made

    p1 = plan(Plan.Status.SUCCEEDED, tokens=(1000, 500), ran=10, waits=60)
    p2 = plan(Plan.Status.SUCCEEDED, tokens=(2000, 1000), ran=30, waits=120, edited=True)
    p3 = plan(Plan.Status.FAILED, ran=20, replans=1, waits=30)
    plan(Plan.Status.AWAITING_APPROVAL)
    for owner, statuses in [(p1, ["succeeded", "succeeded"]), (p2, ["succeeded", "skipped"]), (p3, ["succeeded", "failed"])]:
        for index, status in enumerate(statuses):
            Step.objects.create(plan=owner, key=f"s{index}", title="t", tool="noop", status=status, risk="low")
    gate_step = Step.objects.create(plan=p2, key="g", title="g", tool="high_effect", status="succeeded", risk="high")
    Approval.objects.create(plan=p2, step=gate_step, kind="gate", decision="approved", approver=bob, revision=2, content_hash="g1")
    Approval.objects.create(plan=p3, kind="gate", decision="rejected", approver=bob, revision=1, content_hash="g2")

    client.force_login(make_user("carol", "auditor"))
    page = client.get("/metrics/").content.decode()
    expected = {
        "m-success": "67%",
        "m-step-failure": "17%",
        "m-replan": "33% (1 replans)",
        "m-approval": "60.0 s median · 120.0 s p90",
        "m-completion": "20.0 s median · 30.0 s p90",
        "m-edits": "33% (1 of 3 approved plans) · 1.0 changes vs the proposal on average",
        "m-gates": "1 approved · 1 denied (50% approved)",
        "m-tokens": "3000 in · 1500 out · 1125 per plan",
        "m-cost": "$0.0036 · $0.0009 per plan",
    }
    for cell, text in expected.items():
        assert f'id="{cell}">{text}' in page, (cell, page[page.find(cell) - 10 : page.find(cell) + 120])
    assert "Succeeded" in page and '<svg class="bars"' in page


def test_the_metrics_period_is_validated(client, db):
    client.force_login(make_user("carol", "auditor"))
    response = client.get("/metrics/?since=2026-13-01")
    assert response.status_code == 422 and "YYYY-MM-DD" in response.content.decode()
