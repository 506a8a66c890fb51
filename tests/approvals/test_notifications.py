"""Notifications: an email with a link to the exact page, and signed webhooks retried after a failure."""

import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import mail

from approvals import audit
from approvals.models import WebhookDelivery, WebhookEndpoint
from approvals.tasks import email_send_task, webhook_deliver_task
from approvals.webhooks import backoff_seconds
from core import jobs
from execution import engine
from planning import services
from planning.models import Goal, Plan
from planning.validation import validate_plan
from tests.conftest import make_user
from tests.fixtures.plans import approved_plan, step

SECRET = "a-shared-webhook-secret"


class Receiver(BaseHTTPRequestHandler):
    """Answers 500 to the first delivery and 200 after; keeps what it was sent."""

    received: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((dict(self.headers), body))
        self.send_response(500 if len(self.received) == 1 else 200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    Receiver.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()


@pytest.fixture
def queued(monkeypatch):
    names = []
    monkeypatch.setattr(jobs, "enqueue", lambda name, *args, **options: names.append((name, *args)))
    return names


@pytest.fixture
def people(db):
    return make_user("alice", "operator"), make_user("bob", "approver")


def test_a_plan_awaiting_approval_emails_the_approvers_a_link_to_it(people, queued, settings):
    settings.COUNTERSIGN_SITE_URL = "https://countersign.example"
    plan = Plan.objects.create(goal=Goal.objects.create(text="Notify", requester=people[0]), status=Plan.Status.AWAITING_APPROVAL)
    services.write_revision(plan, validate_plan({"steps": [step("s1", "noop")]}), author=None, planner="human", reason="test")
    # The planner records this event when it proposes a plan; here the test does.
    audit.record(action="plan.proposed", plan_id=plan.pk, data={})
    (email,) = [args for name, *args in queued if name == "approvals.tasks.email_send_task"]
    assert email_send_task.apply(args=email).get() == 1
    assert [m.to for m in mail.outbox] == [["bob@example.com"]]
    assert f"https://countersign.example/plans/{plan.pk}/" in mail.outbox[0].body
    assert f"Plan {plan.pk} awaits approval" in mail.outbox[0].subject


def test_a_webhook_is_signed_and_retried_after_a_500(people, queued, receiver):
    endpoint = WebhookEndpoint.objects.create(name="ops", url=receiver, secret=SECRET)
    plan = approved_plan(people, [step("pay", "high_effect", {"label": "pay"})])
    engine.plan_run(plan_id=plan.pk, actor=people[0])
    delivery = WebhookDelivery.objects.get(endpoint=endpoint, event="gate.opened")
    assert ("approvals.tasks.webhook_deliver_task", delivery.pk) in queued

    assert webhook_deliver_task.apply(args=[delivery.pk]).get() == "delivered"
    delivery.refresh_from_db()
    assert delivery.status_codes == [500, 200] and delivery.attempts == 2 and delivery.delivered_at is not None
    assert len(Receiver.received) == 2
    for headers, body in Receiver.received:
        expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(headers["X-Countersign-Signature"], expected)
    sent = json.loads(Receiver.received[1][1])
    assert sent["event"] == "gate.opened" and sent["step_key"] == "pay" and sent["url"].endswith(f"/plans/{plan.pk}/#step-pay")


def test_a_slack_endpoint_gets_a_text_body(people, queued):
    WebhookEndpoint.objects.create(name="slack", url="http://127.0.0.1:9/", secret=SECRET, body_format="slack", events=["gate.opened"])
    plan = approved_plan(people, [step("pay", "high_effect", {"label": "pay"})])
    engine.plan_run(plan_id=plan.pk, actor=people[0])
    (delivery,) = WebhookDelivery.objects.all()
    assert set(delivery.body) == {"text"} and "waits for a runtime approval" in delivery.body["text"]


def test_backoff_doubles_with_each_attempt(settings):
    settings.COUNTERSIGN_WEBHOOK_BACKOFF_S = 2
    assert [backoff_seconds(n) for n in (1, 2, 3, 4)] == [2, 4, 8, 16]


def test_a_delivery_whose_message_was_lost_is_queued_again_by_the_reconciler(people, queued):
    from datetime import timedelta

    from django.utils import timezone

    from approvals.webhooks import stranded_after_s
    from execution.reconcile import reconcile

    endpoint = WebhookEndpoint.objects.create(name="ops", url="http://127.0.0.1:9/", secret=SECRET)
    long_ago = timezone.now() - timedelta(seconds=stranded_after_s() + 1)
    # The process died after the commit that created it, before its task was queued: nothing will send it.
    lost = WebhookDelivery.objects.create(endpoint=endpoint, event="gate.opened", body={}, touched_at=long_ago)
    recent = WebhookDelivery.objects.create(endpoint=endpoint, event="gate.opened", body={})
    done = WebhookDelivery.objects.create(endpoint=endpoint, event="gate.opened", body={}, touched_at=long_ago, delivered_at=long_ago)
    assert reconcile()["webhooks"] == 1
    assert ("approvals.tasks.webhook_deliver_task", lost.pk) in queued
    assert ("approvals.tasks.webhook_deliver_task", recent.pk) not in queued and (
        "approvals.tasks.webhook_deliver_task",
        done.pk,
    ) not in queued
    # Queued once: the next pass leaves it to the task it just sent.
    assert reconcile()["webhooks"] == 0
