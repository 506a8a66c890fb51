"""Risk policy and the four-eyes rule."""

from django.conf import settings
from django.db import models


class Risk(models.TextChoices):
    LOW = "low", "Low"
    MEDIUM = "medium", "Medium"
    HIGH = "high", "High"


# A tool that declares nothing is treated as the most dangerous kind.
DEFAULT_RISK = Risk.HIGH


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
