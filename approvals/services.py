"""Writes on approvals that do not depend on who owns the approved thing."""

from django.utils import timezone

from approvals.models import Approval


def plan_approvals_void(*, plan_id: int, reason: str) -> int:
    """Void every live countersignature of a plan (its content or its diff changed). Returns how many."""
    return Approval.objects.filter(plan_id=plan_id, kind=Approval.Kind.PLAN, voided_at__isnull=True).update(
        voided_at=timezone.now(), void_reason=reason[:200]
    )
