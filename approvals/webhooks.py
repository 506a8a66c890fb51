"""Delivering one webhook: POST the JSON body, signed with HMAC-SHA256 of the endpoint's secret over
the exact bytes sent (header `X-Countersign-Signature: sha256=<hex>`); every attempt's status is logged."""

import hashlib
import hmac
import json
import urllib.error
import urllib.request
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from approvals.models import WebhookDelivery
from core import jobs

SIGNATURE_HEADER = "X-Countersign-Signature"


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _post(url: str, body: bytes, headers: dict) -> int:
    if not url.startswith(("http://", "https://")):
        raise ValueError("A webhook URL must be http:// or https://.")
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310 - scheme checked above
    try:
        with urllib.request.urlopen(request, timeout=settings.COUNTERSIGN_WEBHOOK_TIMEOUT_S) as response:  # noqa: S310
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def delivery_attempt(delivery_id: int) -> str:
    """One attempt: "delivered", "retry" (a non-2xx answer or no answer, attempts left) or "failed"."""
    delivery = WebhookDelivery.objects.select_related("endpoint").get(pk=delivery_id)
    if delivery.delivered_at or delivery.failed_at:
        return "delivered" if delivery.delivered_at else "failed"
    body = json.dumps(delivery.body, sort_keys=True).encode()
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: signature(delivery.endpoint.secret, body),
        "X-Countersign-Event": delivery.event,
        "X-Countersign-Delivery": str(delivery.pk),
    }
    try:
        status, error = _post(delivery.endpoint.url, body, headers), ""
    except (OSError, ValueError) as problem:
        status, error = None, str(problem)[:500]
    with transaction.atomic():
        delivery = WebhookDelivery.objects.select_for_update().get(pk=delivery_id)
        delivery.attempts += 1
        delivery.touched_at = timezone.now()
        delivery.status_code, delivery.error = status, error or (f"HTTP {status}" if status and status >= 300 else "")
        delivery.status_codes = [*delivery.status_codes, status or 0]
        if status is not None and 200 <= status < 300:
            delivery.delivered_at, outcome = timezone.now(), "delivered"
        elif delivery.attempts >= settings.COUNTERSIGN_WEBHOOK_ATTEMPTS:
            delivery.failed_at, outcome = timezone.now(), "failed"
        else:
            outcome = "retry"
        delivery.save()
    return outcome


def backoff_seconds(attempts: int) -> float:
    """Exponential: base, 2 x base, 4 x base... after the 1st, 2nd, 3rd failed attempt."""
    return settings.COUNTERSIGN_WEBHOOK_BACKOFF_S * 2 ** max(attempts - 1, 0)


def stranded_after_s() -> float:
    """Longer than a delivery's whole retry schedule (every backoff and every request timeout) plus a margin."""
    attempts = settings.COUNTERSIGN_WEBHOOK_ATTEMPTS
    backoffs = sum(backoff_seconds(n) for n in range(1, attempts))
    return backoffs + attempts * settings.COUNTERSIGN_WEBHOOK_TIMEOUT_S + 300


def requeue_stranded(now) -> int:
    """Queue again every pending delivery nobody has touched for longer than its retry schedule."""
    cutoff = now - timedelta(seconds=stranded_after_s())
    stranded = list(
        WebhookDelivery.objects.filter(delivered_at__isnull=True, failed_at__isnull=True, touched_at__lt=cutoff).values_list(
            "pk", flat=True
        )[:200]
    )
    with transaction.atomic():
        WebhookDelivery.objects.filter(pk__in=stranded).update(touched_at=now)
        for delivery_id in stranded:
            jobs.enqueue("approvals.tasks.webhook_deliver_task", delivery_id)
    return len(stranded)
