"""The fragments that make the plan page live: swapped in place by the htmx ws extension (hx-swap-oob)."""

import threading
from collections import OrderedDict

from django.template.loader import render_to_string
from django.utils.dateparse import parse_datetime

from approvals.policy import four_eyes_violation
from core.roles import user_can
from planning.diff import changes_since_proposal
from planning.graph import plan_graph
from planning.models import Plan, Step
from planning.selectors import waiting_gates


def progress_of(steps) -> dict:
    total = len(steps)
    done = sum(1 for s in steps if s.status in {Step.Status.SUCCEEDED, Step.Status.SKIPPED, Step.Status.FAILED, Step.Status.CANCELLED})
    return {"total": total, "done": done, "percent": int(100 * done / total) if total else 0}


def step_controls(plan: Plan, user, authors: set[int]) -> dict:
    gate_blocker = None
    if user_can(user, "approve"):
        gate_blocker = four_eyes_violation(approver=user, author_ids=authors, requester_id=plan.goal.requester_id)
    return {
        "can_gate": user_can(user, "approve") and gate_blocker is None,
        "gate_blocker": gate_blocker if user_can(user, "approve") else None,
        "can_operate": user_can(user, "run"),
    }


def render_inbox_fragments(user) -> str:
    """The live parts of the inbox: the gates waiting (for approvers) and a nudge that reloads the plan
    list with its tab counts, keeping the tab and page the user is on."""
    approver = user_can(user, "approve")
    gates = list(waiting_gates()[:50]) if approver else []
    badge = waiting_gates().count() if approver else None
    return render_to_string("planning/_inbox_live.html", {"gates": gates, "badge": badge, "oob": True})


def render_gates_badge(user) -> str:
    """The nav badge alone, for pages other than the inbox."""
    return render_to_string("planning/_gates_badge.html", {"count": waiting_gates().count(), "oob": True})


class _Renderings:
    """The fragments of recent events, by event and by what a viewer's controls are. Fragments are
    rendered without a request (no user, no CSRF token in them): two viewers with the same controls get
    the same bytes, so an event watched by twenty people is rendered once per kind of viewer in a process,
    not twenty times. Each viewer's permission is still checked before it is sent anything. An entry is
    wanted only while the subscribers of its event render, so few are kept (a revision's fragments of a
    long plan are large)."""

    def __init__(self, size: int = 64):
        self.size, self.items, self.lock = size, OrderedDict(), threading.Lock()

    def get(self, key):
        with self.lock:
            return self.items.get(key)

    def put(self, key, value: str) -> None:
        with self.lock:
            self.items[key] = value
            while len(self.items) > self.size:
                self.items.popitem(last=False)


renderings = _Renderings()


def render_plan_fragments(plan: Plan, user, *, step_keys=None, logs=(), at: str | None = None, event_id: str | None = None) -> str:
    authors = plan.author_ids()
    controls = step_controls(plan, user, authors)
    key = (plan.pk, event_id, tuple(sorted(controls.items()))) if event_id else None
    if key is not None and (cached := renderings.get(key)) is not None:
        return cached
    html = _render_plan_fragments(plan, controls, step_keys=step_keys, logs=logs, at=at)
    if key is not None:
        renderings.put(key, html)
    return html


def _render_plan_fragments(plan: Plan, controls: dict, *, step_keys, logs, at) -> str:
    steps = list(plan.steps.all())
    shown = steps if step_keys is None else [s for s in steps if s.key in set(step_keys)]
    context = {
        "plan": plan,
        "steps": shown,
        "progress": progress_of(steps),
        "logs": list(logs),
        "at": parse_datetime(at) if at else None,
        "oob": True,
        "full": step_keys is None,
        # The graph's nodes carry step statuses, so it is redrawn whole with every change.
        "graph": plan_graph(steps) if steps else None,
        "proposal_changes": changes_since_proposal(list(plan.revisions.select_related("author").order_by("number"))),
        # Called by the template only where the answer is rendered, so a step's update costs no query.
        "facts": plan.facts.all,
        **controls,
    }
    return render_to_string("planning/_live_update.html", context)
