"""Telling people about work waiting for them: email (Django's backend, with a link to the exact page)
and outgoing webhooks (signed JSON or a Slack-compatible body, delivered with retries by a Celery task).

Driven by the audit trail: the events below are what "a plan awaits approval", "a gate opened", "a
deadline passed" and "a run ended" look like there, so no service has to remember to notify."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db.models import Q
from django.urls import reverse

from approvals.models import AuditEvent, WebhookDelivery, WebhookEndpoint
from core import jobs

APPROVERS = "approvers"
ESCALATION = "escalation"
REQUESTER = "requester"

# audit action -> (notification event, who hears about it, sentence)
NOTICES = {
    "plan.proposed": ("plan.awaiting_approval", APPROVERS, "Plan {plan_id} awaits approval"),
    "plan.edited": ("plan.awaiting_approval", APPROVERS, "Plan {plan_id} was edited and awaits approval"),
    "plan.resubmitted": ("plan.awaiting_approval", APPROVERS, "Plan {plan_id} was resubmitted for approval"),
    "plan.replan_proposed": ("plan.awaiting_approval", APPROVERS, "A replan of plan {plan_id} awaits approval"),
    "gate.opened": ("gate.opened", APPROVERS, "Step {step_key} of plan {plan_id} waits for a runtime approval"),
    "plan.escalated": ("deadline.escalated", ESCALATION, "Plan {plan_id} passed its approval deadline"),
    "gate.escalated": ("deadline.escalated", ESCALATION, "The gate of step {step_key} in plan {plan_id} passed its deadline"),
    "plan.succeeded": ("run.ended", REQUESTER, "Plan {plan_id} succeeded"),
    "plan.partially_completed": ("run.ended", REQUESTER, "Plan {plan_id} partially completed"),
    "plan.failed": ("run.ended", REQUESTER, "Plan {plan_id} failed"),
}


def on_audit_event(event: AuditEvent) -> None:
    """Called by audit.record for every event; only the events above notify anyone."""
    notice = NOTICES.get(event.action)
    if notice is None or event.plan_id is None:
        return
    name, audience, sentence = notice
    text = sentence.format(plan_id=event.plan_id, step_key=event.step_key)
    reason = event.data.get("reason")
    if reason:
        text = f"{text}: {reason}"
    url = page_url(event.plan_id, event.step_key)
    _email(_recipients(audience, event), f"[Countersign] {text}", f"{text}.\n\nOpen it: {url}\n")
    _webhooks(name, {"event": name, "text": text, "url": url, "plan_id": event.plan_id, "step_key": event.step_key, "audit_seq": event.seq})


def page_url(plan_id: int, step_key: str = "") -> str:
    path = reverse("plan_detail", args=[plan_id]) + (f"#step-{step_key}" if step_key else "")
    return settings.COUNTERSIGN_SITE_URL.rstrip("/") + path


def _recipients(audience: str, event: AuditEvent) -> list[str]:
    users = get_user_model().objects.filter(is_active=True).exclude(email="")
    if audience == APPROVERS:
        perm = Q(groups__permissions__codename="approve_plan") | Q(user_permissions__codename="approve_plan") | Q(is_superuser=True)
        users = users.filter(perm)
    elif audience == ESCALATION:
        users = users.filter(groups__name=settings.COUNTERSIGN_ESCALATION_GROUP)
    else:
        requester = AuditEvent.objects.filter(plan_id=event.plan_id, action="goal.submitted").values_list("actor_id", flat=True).first()
        users = users.filter(pk=requester)
    if event.actor_id is not None:
        users = users.exclude(pk=event.actor_id)
    return sorted(set(users.values_list("email", flat=True)))


def _email(recipients: list[str], subject: str, body: str) -> None:
    # Sent by a worker after commit: a slow or absent mail server never holds up the decision that caused it.
    if recipients:
        jobs.enqueue("approvals.tasks.email_send_task", subject, body, recipients)


def email_send(subject: str, body: str, recipients: list[str]) -> int:
    return send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, recipients)


def _webhooks(name: str, body: dict) -> None:
    for endpoint in WebhookEndpoint.objects.filter(active=True):
        if endpoint.events and name not in endpoint.events:
            continue
        payload = {"text": f"{body['text']} <{body['url']}|open>"} if endpoint.body_format == WebhookEndpoint.Format.SLACK else body
        delivery = WebhookDelivery.objects.create(endpoint=endpoint, event=name, body=payload)
        jobs.enqueue("approvals.tasks.webhook_deliver_task", delivery.pk)
