from celery import shared_task

from approvals import notifications, webhooks
from approvals.models import WebhookDelivery


@shared_task(name="approvals.tasks.webhook_deliver_task", bind=True, acks_late=True, max_retries=None, soft_time_limit=30, time_limit=40)
def webhook_deliver_task(self, delivery_id: int) -> str:
    outcome = webhooks.delivery_attempt(delivery_id)
    if outcome == "retry":
        attempts = WebhookDelivery.objects.values_list("attempts", flat=True).get(pk=delivery_id)
        raise self.retry(countdown=webhooks.backoff_seconds(attempts))
    return outcome


@shared_task(name="approvals.tasks.email_send_task", bind=True, acks_late=True, max_retries=5, soft_time_limit=60, time_limit=70)
def email_send_task(self, subject: str, body: str, recipients: list[str]) -> int:
    try:
        return notifications.email_send(subject, body, recipients)
    except OSError as problem:  # SMTP down or refusing: try again later rather than lose the notice
        raise self.retry(exc=problem, countdown=30) from problem
