"""Risk tiers: the shared vocabulary of the registry, plans, policies and pages."""

from django.db import models


class Risk(models.TextChoices):
    LOW = "low", "Low"
    MEDIUM = "medium", "Medium"
    HIGH = "high", "High"


# A tool that declares nothing is treated as the most dangerous kind.
DEFAULT_RISK = Risk.HIGH
