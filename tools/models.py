from django.conf import settings
from django.db import models

from core.canonical import sha256_of
from core.risk import Risk

# How many earlier definitions of one tool are kept (to say what changed since a step pinned one).
HISTORY_LIMIT = 20


class ToolSource(models.Model):
    """An MCP server whose tools Countersign may call. Header values are secrets: stored, never shown."""

    class Transport(models.TextChoices):
        STDIO = "stdio", "stdio (a local command)"
        HTTP = "http", "Streamable HTTP"

    class SyncStatus(models.TextChoices):
        NEVER = "never", "Never synced"
        OK = "ok", "OK"
        FAILED = "failed", "Failed"

    name = models.SlugField(max_length=40, unique=True, help_text="Prefix of its tools' names: NAME.TOOL")
    transport = models.CharField(max_length=8, choices=Transport.choices)
    command = models.JSONField(default=list, blank=True, help_text="stdio: the argv list")
    cwd = models.CharField(max_length=500, blank=True, help_text="stdio: working directory")
    env = models.JSONField(default=dict, blank=True, help_text="stdio: the only variables passed beyond PATH, HOME and the like")
    url = models.URLField(max_length=2000, blank=True, help_text="http: the Streamable HTTP endpoint")
    headers = models.JSONField(default=dict, blank=True, help_text="http: secret headers (never shown back)")
    trusted = models.BooleanField(default=False, help_text="Only a trusted source's annotations set risk tiers")
    enabled = models.BooleanField(default=True)
    timeout_s = models.FloatField(default=30.0, help_text="Per-call timeout of its tools")
    last_synced_at = models.DateTimeField(null=True, blank=True)
    last_sync_status = models.CharField(max_length=8, choices=SyncStatus.choices, default=SyncStatus.NEVER)
    last_sync_error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    @property
    def target(self) -> str:
        """Where the server is, safe to show: the command line or the URL (never the headers)."""
        return " ".join(self.command) if self.transport == self.Transport.STDIO else self.url


class ToolDefinition(models.Model):
    """One tool of a source as last seen by a sync, with the risk Countersign assigns it."""

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        CHANGED = "changed", "Changed"
        REMOVED = "removed", "Removed"

    source = models.ForeignKey(ToolSource, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=200, help_text="The tool's name on its server")
    full_name = models.CharField(max_length=100, unique=True, help_text="SOURCE.TOOL, the name plans use")
    description = models.TextField(blank=True)
    input_schema = models.JSONField(default=dict)
    annotations = models.JSONField(default=dict)
    definition_hash = models.CharField(max_length=64)
    previous_hash = models.CharField(max_length=64, blank=True, help_text="The definition before the last change")
    history = models.JSONField(default=dict, help_text="Earlier definitions by hash, for diffs")
    risk = models.CharField(max_length=8, choices=Risk.choices, default=Risk.HIGH)
    risk_reason = models.CharField(max_length=500)
    idempotent = models.BooleanField(default=False)
    risk_override = models.CharField(max_length=8, choices=Risk.choices, blank=True)
    idempotent_override = models.BooleanField(null=True, blank=True)
    override_reason = models.CharField(max_length=500, blank=True)
    override_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.ACTIVE)
    changed_at = models.DateTimeField(null=True, blank=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)

    class Meta:
        ordering = ["full_name"]

    def __str__(self):
        return self.full_name

    def definition(self) -> dict:
        return {"name": self.full_name, "description": self.description, "input_schema": self.input_schema, "annotations": self.annotations}

    @property
    def previous_definition(self) -> dict | None:
        return self.history.get(self.previous_hash) if self.previous_hash else None


def definition_hash_of(definition: dict) -> str:
    return sha256_of(definition)
