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
        # Nobody decided before the final deadline: an outcome of its own, never a denial.
        EXPIRED = "expired", "Expired"

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


class StandingGrant(models.Model):
    """An approver's standing decision: runtime gates of `tool` whose resolved arguments match
    `predicate` are approved automatically, for at most `max_uses` calls and/or until `expires_at`.
    `predicate` maps an argument name to {"equals": value} or {"min": n, "max": n} (either bound)."""

    tool = models.CharField(max_length=200, db_index=True)
    predicate = models.JSONField(default=dict)
    max_uses = models.PositiveIntegerField(null=True, blank=True)
    uses = models.PositiveIntegerField(default=0)
    expires_at = models.DateTimeField(null=True, blank=True)
    reason = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="standing_grants")
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"grant #{self.pk} for {self.tool}"

    def state(self, now=None) -> str:
        """live, revoked, expired or used up."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= (now or timezone.now()):
            return "expired"
        if self.max_uses is not None and self.uses >= self.max_uses:
            return "used up"
        return "live"

    @property
    def uses_left(self) -> int | None:
        return None if self.max_uses is None else max(self.max_uses - self.uses, 0)


class WebhookEndpoint(models.Model):
    """Where notifications are posted: a JSON body signed with HMAC-SHA256 of `secret` in the
    X-Countersign-Signature header (`sha256=<hex>`), or a Slack-compatible `{"text": ...}` body."""

    class Format(models.TextChoices):
        JSON = "json", "Countersign JSON"
        SLACK = "slack", "Slack-compatible"

    name = models.CharField(max_length=100)
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=200)
    body_format = models.CharField(max_length=8, choices=Format.choices, default=Format.JSON)
    events = models.JSONField(default=list, blank=True, help_text="Event names to send; empty sends all.")
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.name


class WebhookDelivery(models.Model):
    """One notification to one endpoint, with every attempt's outcome."""

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=64)
    body = models.JSONField()
    attempts = models.PositiveIntegerField(default=0)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    status_codes = models.JSONField(default=list)
    delivered_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # When it was last tried or queued: a pending delivery untouched for long had its message lost
    # (a crash between commit and queueing, or a broker restart), and the reconciler queues it again.
    touched_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.event} to {self.endpoint}"
