"""The plan page's activity log speaks in sentences, never in raw audit event names."""

import re

from django.urls import reverse

from core import jobs
from execution import engine
from tests.fixtures.plans import approved_plan, step


def test_the_activity_log_reads_as_sentences(alice, bob, alice_client, monkeypatch):
    monkeypatch.setattr(jobs, "enqueue", lambda *args, **options: None)
    plan = approved_plan((alice, bob), [step("s1", "noop"), step("g", "high_effect", {"label": "log"}, depends_on=["s1"])])
    engine.plan_run(plan_id=plan.pk, actor=alice)
    page = alice_client.get(reverse("plan_detail", args=[plan.pk])).content.decode()
    log = page[page.index('id="plan-log"') : page.index("</ol>", page.index('id="plan-log"'))]
    assert "Run started · alice" in log and "Plan approved · bob" in log
    # No "plan.run_started" or "step.queued": an event name is a word, a dot and a word.
    assert re.search(r"\b[a-z_]+\.[a-z_]+\b", log) is None, log
