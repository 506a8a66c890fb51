"""Risk policy and the four-eyes rule."""

from django.conf import settings

from core.risk import Risk


def needs_runtime_gate(risk: str) -> bool:
    return risk == Risk.HIGH


def four_eyes_violation(*, approver, author_ids: set[int], requester_id: int | None) -> str | None:
    """Why `approver` may not countersign, or None. Authors of the revision and the goal's requester
    are excluded while COUNTERSIGN_FOUR_EYES is on."""
    if not settings.COUNTERSIGN_FOUR_EYES:
        return None
    if approver.pk == requester_id:
        return "Four-eyes rule: you requested this goal, so someone else must approve it."
    if approver.pk in author_ids:
        return "Four-eyes rule: you edited this plan, so someone else must approve it."
    return None
