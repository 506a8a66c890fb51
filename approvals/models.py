import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone


class Approval(models.Model):
    """A countersignature: bound to the exact content decided on (plan revision hash, or gate hash)."""

    class Kind(models.TextChoices):
        PLAN = "plan", "Plan revision"
        GATE = "gate", "Runtime gate"

    class Decision(models.TextChoices):
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        CHANGES_REQUESTED = "changes_requested", "Changes requested"

    plan = models.ForeignKey("planning.Plan", on_delete=models.CASCADE, related_name="approvals")
    step = models.ForeignKey("planning.Step", null=True, blank=True, on_delete=models.CASCADE, related_name="gate_approvals")
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.PLAN)
    decision = models.CharField(max_length=20, choices=Decision.choices)
    comment = models.TextField(blank=True)
    approver = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="approvals")
    revision = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    voided_at = models.DateTimeField(null=True, blank=True)
    void_reason = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["plan", "kind", "voided_at"])]

    def __str__(self):
        return f"{self.get_decision_display()} r{self.revision} by {self.approver}"


class AuditHead(models.Model):
    """One row holding the chain's tip; updating it first serialises writers (see audit.record)."""

    seq = models.BigIntegerField(default=0)
    hash = models.CharField(max_length=64, default="0" * 64)

    def __str__(self):
        return f"audit head #{self.seq}"


class AuditEvent(models.Model):
    """Append-only, hash-chained. Plan and step are plain references so the trail outlives them."""

    seq = models.BigIntegerField(unique=True)
    created_at = models.DateTimeField()
    # PROTECT: a user with history cannot be deleted (deactivate them), and no audit row is ever rewritten.
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    actor_name = models.CharField(max_length=150)
    action = models.CharField(max_length=64, db_index=True)
    plan_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    step_key = models.CharField(max_length=32, blank=True)
    data = models.JSONField(default=dict)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["seq"]

    def __str__(self):
        return f"#{self.seq} {self.action} by {self.actor_name}"


class ApiToken(models.Model):
    """A bearer token for the API. Only its sha256 is stored; the token is shown once when issued. It
    works until it expires (COUNTERSIGN_TOKEN_DAYS after issue, by default) or is revoked."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, default="cli")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.name} for {self.user}"

    @staticmethod
    def digest_of(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    @classmethod
    def issue(cls, *, user, name: str = "cli", days: int | None = None) -> str:
        token = "cs_" + secrets.token_urlsafe(32)
        lifetime = timedelta(days=settings.COUNTERSIGN_TOKEN_DAYS if days is None else days)
        cls.objects.create(user=user, name=name, digest=cls.digest_of(token), expires_at=timezone.now() + lifetime)
        return token

    def state(self, now=None) -> str:
        """active, expired or revoked."""
        if self.revoked_at is not None:
            return "revoked"
        return "expired" if self.expires_at <= (now or timezone.now()) else "active"
