"""Reviewers see what people changed since the planner's proposal: per step, per argument key, by whom."""

import pytest

from planning import services
from planning.models import Goal, Plan
from planning.validation import validate_plan
from tests.fixtures.plans import step

pytestmark = pytest.mark.django_db


def proposed_plan(alice) -> Plan:
    plan = Plan.objects.create(goal=Goal.objects.create(text="Return sunglasses", requester=alice), planner="playbook")
    steps = [step("s1", "noop", {"value": 1}), step("s2", "record_effect", {"label": "refund", "seconds": 0}, depends_on=["s1"])]
    services.write_revision(plan, validate_plan({"steps": steps}), author=None, planner="playbook", reason="Proposed by a playbook")
    return Plan.objects.get(pk=plan.pk)


def test_the_approval_card_names_each_changed_argument_and_its_editor(alice, bob_client):
    plan = proposed_plan(alice)
    changes = {"title": "record_effect s2", "args": {"label": "refund", "seconds": 2}}
    services.step_update(plan_id=plan.pk, actor=alice, revision=1, key="s2", changes=changes)
    services.step_add(plan_id=plan.pk, actor=alice, revision=2, step={"title": "Tell the customer", "tool": "noop", "args": {"value": 7}})

    page = bob_client.get(f"/plans/{plan.pk}/").content.decode()

    panel = page[page.index('id="proposal-changes"') :]
    panel = panel[: panel.index("</section>")]
    assert "Changes since the planner’s proposal" in panel
    assert "<code>args.seconds</code>" in panel and "<del>0</del> → <ins>2</ins>" in panel
    assert "args.label" not in panel, "an unchanged argument key is not listed"
    assert "s3</code></a> added" in panel and "<ins>{&quot;value&quot;: 7}</ins>" in panel
    assert panel.count("by alice") == 2


def test_a_revision_diff_lists_only_changed_keys_and_shows_added_steps_in_full(alice, alice_client):
    plan = proposed_plan(alice)
    form_fields = {"title": "record_effect s2", "description": "", "tool": "record_effect", "depends_on": ["s1"]}
    form_fields |= {"condition": "", "success_criteria": "", "args": {"label": "refund", "seconds": 3}}
    services.step_update(plan_id=plan.pk, actor=alice, revision=1, key="s2", changes=form_fields)
    services.step_add(plan_id=plan.pk, actor=alice, revision=2, step={"title": "Tell", "tool": "noop", "args": {"value": 7}})

    first = alice_client.get(f"/plans/{plan.pk}/revisions/?a=1&b=2").content.decode()
    assert "Edited s2: args" in first, "the revision list names only the field whose value changed"
    assert "args.seconds" in first and "args.label" not in first
    assert "<td>description</td>" not in first and "<td>title</td>" not in first

    second = alice_client.get(f"/plans/{plan.pk}/revisions/?a=2&b=3").content.decode()
    assert "<dt>tool</dt><dd><ins>noop</ins></dd>" in second
    assert "<dt>args</dt><dd><ins>{&quot;value&quot;: 7}</ins></dd>" in second
