"""Live fragments are rendered once per event for each kind of viewer, not once per subscriber."""

import pytest
from django.test.signals import template_rendered

from planning.fragments import render_plan_fragments
from tests.conftest import make_user
from tests.fixtures.plans import approved_plan, step


@pytest.fixture
def live_renders():
    seen = []

    def count(sender, template, context, **kwargs):
        if template.name == "planning/_live_update.html":
            seen.append(template.name)

    template_rendered.connect(count)
    yield seen
    template_rendered.disconnect(count)


@pytest.fixture
def plan(db):
    alice, bob = make_user("alice", "operator"), make_user("bob", "approver")
    return approved_plan((alice, bob), [step("look", "noop"), step("pay", "high_effect", {"label": "x"}, depends_on=["look"])])


def test_two_approvers_watching_one_event_share_one_rendering(plan, live_renders):
    bob, erin = make_user("bob", "approver"), make_user("erin", "approver")
    for_bob = render_plan_fragments(plan, bob, step_keys=["look"], event_id="e1")
    for_erin = render_plan_fragments(plan, erin, step_keys=["look"], event_id="e1")
    assert for_erin == for_bob and len(live_renders) == 1


def test_a_viewer_with_other_controls_gets_a_rendering_of_their_own(plan, live_renders):
    bob, alice = make_user("bob", "approver"), plan.goal.requester
    render_plan_fragments(plan, bob, step_keys=["pay"], event_id="e2")
    # The requester may not decide gates on her own plan (four-eyes): her fragment differs, so it is rendered.
    render_plan_fragments(plan, alice, step_keys=["pay"], event_id="e2")
    assert len(live_renders) == 2


def test_each_event_and_each_reconnect_is_rendered_afresh(plan, live_renders):
    bob = make_user("bob", "approver")
    render_plan_fragments(plan, bob, step_keys=["look"], event_id="e3")
    render_plan_fragments(plan, bob, step_keys=["look"], event_id="e4")
    # A (re)connect carries no event id: it always reads the current state.
    render_plan_fragments(plan, bob)
    render_plan_fragments(plan, bob)
    assert len(live_renders) == 4
